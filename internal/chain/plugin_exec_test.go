package chain_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestExecdChainRefusesBadNesting execs the binary as `chain` the way a runtime does,
// with configs a runtime may hand it: each is refused with the spec's code, the message
// naming the key down to the child, a non-zero exit, and no child run (lo stays down).
func TestExecdChainRefusesBadNesting(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := testns.LinkPluginDir(t, "chain", "loopback")
	lo := `{"type":"loopback"}`
	cases := []struct {
		name, plugins, extra string
		code                 uint
		msg                  string
	}{
		{"no list", ``, ``, 7, "chain: plugins: missing"},
		{"list is no list", `,"plugins":{"type":"loopback"}`, ``, 7, `chain: plugins: must be a list of plugin objects, got {"type":"loopback"}`},
		{"empty list", `,"plugins":[]`, ``, 7, "chain: plugins: the list is empty"},
		{"null list", `,"plugins":null`, ``, 7, "chain: plugins: the list is empty"},
		{"child is no object", `,"plugins":[` + lo + `,"bridge"]`, ``, 7, `chain: plugins[1]: must be a plugin object, got "bridge"`},
		{"child without type", `,"plugins":[` + lo + `,{"bridge":"br0"}]`, ``, 7, "chain: plugins[1].type: missing"},
		{"child with empty type", `,"plugins":[` + lo + `,{"type":""}]`, ``, 7, "chain: plugins[1].type: empty"},
		{"child type no string", `,"plugins":[` + lo + `,{"type":7}]`, ``, 7, "chain: plugins[1].type: must be a string, got 7"},
		{"child type a path", `,"plugins":[` + lo + `,{"type":"../../bin/sh"}]`, ``, 7, `chain: plugins[1].type: "../../bin/sh" must be a plugin name, not a path`},
		{"chain in a chain", `,"plugins":[` + lo + `,` + lo + `,{"type":"chain","plugins":[` + lo + `]}]`, ``, 7, "chain: plugins[2].type: a chain cannot be nested in a chain"},
		{"bad capabilities", `,"plugins":[{"type":"loopback","capabilities":{"portMappings":"yes"}}]`, ``, 7, "chain: plugins[0].capabilities: must map capability names to true or false"},
		{"bad disableCheck", `,"plugins":[` + lo + `]`, `,"disableCheck":"maybe"`, 7, `chain: disableCheck: must be true or false, got "maybe"`},
		{"runtimeConfig no object", `,"plugins":[` + lo + `]`, `,"runtimeConfig":[1]`, 7, "chain: runtimeConfig: must be an object"},
		{"undeclared capability", `,"plugins":[{"type":"loopback","capabilities":{"bandwidth":true}}]`, ``, 7, "chain: capabilities: the children use bandwidth but the chain does not declare it"},
		{"not JSON", `,"plugins":[`, ``, 6, "decoding network config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctr := testns.New(t)
			conf := `{"cniVersion":"1.1.0","name":"std","type":"chain"` + tc.extra + tc.plugins + `}`
			env := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=" + ctr.Path, "CNI_IFNAME=eth0", "CNI_PATH=" + dir}
			var out, errb bytes.Buffer
			err := host.Do(func() error {
				cmd := exec.Command(filepath.Join(dir, "chain"))
				cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, strings.NewReader(conf), &out, &errb
				return cmd.Run()
			})
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stdout %s stderr %s", out.String(), errb.String())
			assert.Equal(t, 1, ee.ExitCode())
			var e cnierror.Error
			require.NoError(t, json.Unmarshal(out.Bytes(), &e), out.String())
			assert.Equal(t, tc.code, e.Code)
			assert.Contains(t, e.Msg, tc.msg)
			assert.False(t, loUp(t, ctr), "no child ran")
		})
	}
}

// TestExecdChainDelOfABrokenNestingFinishes: ADD refuses such a list before any child
// runs, so the runtime's DEL that follows has nothing to undo; it succeeds and says why
// on stderr, instead of keeping the pod's teardown failing for ever.
func TestExecdChainDelOfABrokenNestingFinishes(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := testns.LinkPluginDir(t, "chain")
	var out, errb bytes.Buffer
	err := host.Do(func() error {
		cmd := exec.Command(filepath.Join(dir, "chain"))
		cmd.Env = []string{"CNI_COMMAND=DEL", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "CNI_PATH=" + dir}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0","name":"std","type":"chain","plugins":[{"type":"chain","plugins":[]}]}`)
		cmd.Stdout, cmd.Stderr = &out, &errb
		return cmd.Run()
	})
	require.NoError(t, err, "stdout %s stderr %s", out.String(), errb.String())
	assert.Empty(t, out.String())
	assert.Contains(t, errb.String(), "chain: nothing to delete, no child can have run with this config: "+
		"chain: plugins[0].type: a chain cannot be nested in a chain; list its plugins here instead")
}
