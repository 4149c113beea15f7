package chain_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
)

func builtIn(names ...string) func(string) bool {
	return func(t string) bool { return slices.Contains(names, t) }
}

var standardBuiltins = builtIn("loopback", "bridge", "portmap", "bandwidth", "tuning")

func TestWrapListMovesThePluginsIntoOneChainKeepingNameAndCapabilities(t *testing.T) {
	list := `{"cniVersion":"1.0.0","name":"k8s","disableGC":true,"plugins":[
		{"type":"bridge","bridge":"cni0","ipam":{"type":"host-local","subnet":"10.88.0.0/16"}},
		{"type":"portmap","capabilities":{"portMappings":true,"io.kubernetes.cri.pod-annotations":false}},
		{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
	out, err := chain.WrapList([]byte(list), standardBuiltins)
	require.NoError(t, err)

	n, err := chain.Parse(out)
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "k8s", n.Name)
	assert.Equal(t, "1.0.0", n.CNIVersion)
	assert.True(t, n.DisableGC, "list keys stay where the runtime reads them")
	require.Len(t, n.Plugins, 1)
	assert.Equal(t, "chain", n.Plugins[0].Type)
	assert.Equal(t, map[string]bool{"portMappings": true, "bandwidth": true}, n.Plugins[0].Capabilities,
		"the runtime passes runtime config only for the chain's own capabilities; a false one is not lifted")

	var wrapper struct {
		Plugins []json.RawMessage `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(n.Plugins[0].Bytes, &wrapper))
	orig, err := chain.Parse([]byte(list))
	require.NoError(t, err)
	require.Len(t, wrapper.Plugins, 3)
	for i, p := range orig.Plugins {
		assert.JSONEq(t, string(p.Bytes), string(wrapper.Plugins[i]), "plugins[%d] as written", i)
	}
	assert.Regexp(t, `^\{\n  "cniVersion": "1.0.0",\n  "name": "k8s",\n  "disableGC": true,\n  "plugins": \[\n    \{\n      "type": "chain",`, string(out))
}

func TestWrapListOfAChainIsUnchanged(t *testing.T) {
	list := `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	once, err := chain.WrapList([]byte(list), standardBuiltins)
	require.NoError(t, err)
	twice, err := chain.WrapList(once, standardBuiltins)
	require.NoError(t, err)
	assert.Equal(t, string(once), string(twice), "a DaemonSet's init container may run it on every restart")
}

func TestWrapListRefusesWhatWouldNotBeOneExec(t *testing.T) {
	tests := []struct {
		name, list, want string
	}{
		{"third-party plugin", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"cilium-cni"}]}`,
			`plugins[1].type: "cilium-cni" is not built into cni`},
		{"chain among others", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{"type":"chain","plugins":[{"type":"tuning"}]}]}`,
			"plugins[1].type: a chain plugin cannot be nested"},
		{"no plugins", `{"cniVersion":"1.0.0","name":"n","plugins":[]}`, "plugins: no plugins in list"},
		{"not a list", `{"cniVersion":"1.0.0","name":"n","type":"bridge"}`, "no plugin configs found"},
		{"not JSON", `{`, "parsing configuration list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := chain.WrapList([]byte(tt.list), standardBuiltins)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzWrapList: a list WrapList accepts becomes a list of one chain plugin that libcni's
// loader (Parse) and the chain plugin's (a second WrapList) both take, unchanged by
// wrapping again.
func FuzzWrapList(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		`{"cniVersion":"0.4.0","name":"n","cniVersions":["1.0.0"],"disableCheck":true,"plugins":[{"type":"tuning","x":"<&>"}]}`,
		`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"chain","plugins":[{"type":"bridge"}]}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, list []byte) {
		out, err := chain.WrapList(list, standardBuiltins)
		if err != nil {
			return
		}
		n, err := chain.Parse(out)
		if err != nil {
			t.Fatalf("wrapped list does not load: %v\n%s", err, out)
		}
		if len(n.Plugins) != 1 || n.Plugins[0].Type != "chain" {
			t.Fatalf("wrapped list is %v", n.Types())
		}
		again, err := chain.WrapList(out, standardBuiltins)
		if err != nil || string(again) != string(out) {
			t.Fatalf("wrapping again: %v\n%s\n%s", err, out, again)
		}
	})
}
