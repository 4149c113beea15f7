package dispatch

import (
	"bytes"
	"encoding/json"
	"path"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestOnlyUnknownKeysAreWarnedOf: an ADD warns, once, of a config key its plugin does
// not know, naming the nearest it does, and of nothing else: not of the spec's keys, nor
// of what runtimes add (runtimeConfig's capability args, args, prevResult,
// capabilities, GC's attachments, the log object), nor of a plugin's own keys in any
// letter case encoding/json accepts. Each plugin runs in-process against a CNI_NETNS
// that names no namespace, so that the ADD ends (code 3) once the config is read, inside
// a throwaway host namespace.
func TestOnlyUnknownKeysAreWarnedOf(t *testing.T) {
	host := testns.NewWithLoopback(t)
	missing := filepath.Join(t.TempDir(), "gone")
	dataDir := t.TempDir()
	hostLocal := map[string]any{"type": "host-local", "dataDir": dataDir,
		"ranges": []any{[]any{map[string]any{"subnet": "10.9.0.0/24", "gateway": "10.9.0.1"}}},
		"routes": []any{map[string]any{"dst": "0.0.0.0/0"}}}
	prev := map[string]any{"cniVersion": "1.0.0", "interfaces": []any{map[string]any{"name": "eth0", "sandbox": missing}},
		"ips": []any{map[string]any{"address": "10.9.0.2/24", "interface": 0}}}
	runtime := map[string]any{
		"capabilities":  map[string]any{"portMappings": true, "bandwidth": true, "ips": true, "mac": true},
		"runtimeConfig": map[string]any{"portMappings": []any{}, "bandwidth": map[string]any{}, "ips": []any{}, "mac": "", "k8s.io/anything": 1},
		"args":          map[string]any{"cni": map[string]any{"ips": []any{}, "labels": []any{}}, "org.example/x": 1},
		"dns":           map[string]any{"nameservers": []any{"10.9.0.1"}},
		"log":           map[string]any{},
	}
	cases := []struct {
		plugin string
		keys   map[string]any
		typo   string // a key the plugin does not know, and the one the warning suggests
		near   string
	}{
		{"bridge", map[string]any{"bridge": "cniuk0", "isGateway": true, "ipMasq": true, "IsDefaultGateway": true, "ipam": hostLocal}, "isGatway", "isGateway"},
		{"ptp", map[string]any{"ipMasq": true, "mtu": 1400, "ipam": hostLocal}, "ipMasqq", "ipMasq"},
		{"macvlan", map[string]any{"master": "lo", "mode": "bridge", "ipam": hostLocal}, "mdoe", "mode"},
		{"ipvlan", map[string]any{"master": "lo", "mode": "l2", "ipam": hostLocal}, "mster", "master"},
		{"vlan", map[string]any{"master": "lo", "vlanId": 5, "ipam": hostLocal}, "vlanID2", "vlanId"},
		{"dummy", map[string]any{"ipam": hostLocal}, "mtu", ""},
		{"tap", map[string]any{"multiQueue": true, "ipam": hostLocal}, "multiqueu", "multiQueue"},
		{"host-device", map[string]any{"device": "nodev0", "ipam": hostLocal}, "devcie", "device"},
		{"tuning", map[string]any{"sysctl": map[string]any{"net.ipv4.conf.eth0.arp_notify": "1"}, "promisc": true, "prevResult": prev}, "promsic", "promisc"},
		{"sbr", map[string]any{"table": 100, "prevResult": prev}, "tabel", "table"},
		{"vrf", map[string]any{"vrfname": "blue", "prevResult": prev}, "vrfName2", "vrfname"},
		{"bandwidth", map[string]any{"ingressRate": 1000000, "ingressBurst": 100000, "prevResult": prev}, "ingresRate", "ingressRate"},
		{"loopback", nil, "mtu", ""},
		{"flannel", map[string]any{"subnetFile": filepath.Join(dataDir, "subnet.env"), "dataDir": dataDir,
			"delegate": map[string]any{"isDefaultGateway": true}}, "subnetfiel", "subnetFile"},
		{"dhcp", map[string]any{"ipam": map[string]any{"type": "dhcp", "daemonSocketPath": filepath.Join(dataDir, "dhcp.sock")}}, "ipm", "ipam"},
		{"host-local", map[string]any{"ipam": hostLocal}, "", ""},
		{"host-local", map[string]any{"ipam": pt.Merged(hostLocal, map[string]any{"rangs": []any{}})}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.plugin, func(t *testing.T) {
			p := Lookup(tc.plugin)
			require.NotNil(t, p)
			conf := pt.Config(t, map[string]any{"cniVersion": "1.0.0", "name": "uk", "type": tc.plugin}, runtime, tc.keys)
			var stderr bytes.Buffer
			_, _ = pt.InvokeLogged(t, host, p, pt.Call{Command: "ADD", ContainerID: "uk-1", Netns: missing, IfName: "eth0", Config: conf}, &stderr)
			ipam, _ := tc.keys["ipam"].(map[string]any)
			if _, nested := ipam["rangs"]; nested {
				assert.Equal(t, "host-local: unknown config key \"ipam.rangs\" (did you mean \"ipam.ranges\"?); ignored\n", stderr.String())
				return
			}
			assert.NotContains(t, stderr.String(), "unknown config key", "known and runtime keys")

			if tc.typo == "" {
				return
			}
			stderr.Reset()
			typo := pt.WithKeys(t, conf, map[string]any{tc.typo: true})
			_, _ = pt.InvokeLogged(t, host, p, pt.Call{Command: "ADD", ContainerID: "uk-1", Netns: missing, IfName: "eth0", Config: typo}, &stderr)
			want := tc.plugin + `: unknown config key "` + tc.typo + `"`
			if tc.near != "" {
				want += ` (did you mean "` + tc.near + `"?)`
			}
			assert.Equal(t, 1, bytes.Count(stderr.Bytes(), []byte(want+"; ignored\n")), "warned once: %s", stderr.String())
		})
	}
}

// TestTheShippedChainGetsNoWarning: each plugin of the standard chain the repository
// ships, given what libcni adds to it (name, cniVersion, the capabilities' runtimeConfig,
// prevResult), warns of no key: what operators install must not start with a warning.
func TestTheShippedChainGetsNoWarning(t *testing.T) {
	host := testns.NewWithLoopback(t)
	missing := filepath.Join(t.TempDir(), "gone")
	n, err := chain.Load(filepath.Join(repoRoot, path.Dir(standardConflist)), "std")
	require.NoError(t, err)
	prev := map[string]any{"cniVersion": n.CNIVersion, "interfaces": []any{map[string]any{"name": "eth0", "sandbox": missing}},
		"ips": []any{map[string]any{"address": "10.88.0.2/16", "interface": 0}}}
	runtime := map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth": map[string]any{"ingressRate": 1000000, "ingressBurst": 100000}}
	for i, pc := range n.Plugins {
		t.Run(pc.Type, func(t *testing.T) {
			var keys map[string]any
			require.NoError(t, json.Unmarshal(pc.Bytes, &keys))
			injected := map[string]any{"name": n.Name, "cniVersion": n.CNIVersion, "runtimeConfig": runtime}
			if i > 0 {
				injected["prevResult"] = prev
			}
			var stderr bytes.Buffer
			_, _ = pt.InvokeLogged(t, host, Lookup(pc.Type), pt.Call{Command: "ADD", ContainerID: "std-1", Netns: missing, IfName: "eth0",
				Config: pt.Config(t, keys, injected)}, &stderr)
			assert.NotContains(t, stderr.String(), "unknown config key")
		})
	}
}
