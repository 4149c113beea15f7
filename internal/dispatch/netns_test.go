package dispatch

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestMissingNetnsIsOneCodeForEveryPlugin: every plugin whose ADD or CHECK opens the
// container's namespace answers a CNI_NETNS that names none with the same error, the
// spec's code 3 ("container unknown or does not exist") naming CNI_NETNS. loopback
// answered 3 and bridge 8, so the code did not tell one condition.
func TestMissingNetnsIsOneCodeForEveryPlugin(t *testing.T) {
	host := testns.NewWithLoopback(t) // where the plugins run: nothing reaches the machine's namespace
	missing := filepath.Join(t.TempDir(), "gone")
	prev := map[string]any{"cniVersion": "1.1.0",
		"interfaces": []any{map[string]any{"name": "eth0", "sandbox": missing}},
		"ips":        []any{map[string]any{"address": "10.1.2.3/24", "interface": 0}}}
	hostLocal := pt.HostLocal(t.TempDir(), "10.1.2.0/24")
	cases := []struct {
		plugin  string
		keys    map[string]any
		meta    bool // ADD needs a prevResult
		noCheck bool
	}{
		{plugin: "loopback"},
		{plugin: "bridge", keys: map[string]any{"bridge": "cnimiss0"}},
		{plugin: "bridge", keys: map[string]any{"bridge": "cnimiss0", "ipam": hostLocal}, noCheck: true},
		{plugin: "ptp", keys: map[string]any{"ipam": hostLocal}, noCheck: true},
		{plugin: "macvlan", keys: map[string]any{"master": "lo"}},
		{plugin: "ipvlan", keys: map[string]any{"master": "lo", "ipam": hostLocal}},
		{plugin: "vlan", keys: map[string]any{"master": "lo", "vlanId": 5, "ipam": hostLocal}},
		{plugin: "dummy", keys: map[string]any{"ipam": hostLocal}},
		{plugin: "host-device", keys: map[string]any{"device": "nodev0"}},
		{plugin: "tap"},
		{plugin: "tuning", keys: map[string]any{"sysctl": map[string]any{"net.ipv4.conf.eth0.arp_notify": "1"}}, meta: true},
		{plugin: "sbr", meta: true},
		{plugin: "vrf", keys: map[string]any{"vrfname": "blue"}, meta: true},
		{plugin: "bandwidth", keys: map[string]any{"ingressRate": 1000000, "ingressBurst": 100000}, meta: true, noCheck: true},
		{plugin: "firewall", keys: map[string]any{"backend": "iptables", "ingressPolicy": "same-bridge"}, meta: true, noCheck: true},
	}
	for _, tc := range cases {
		p := Lookup(tc.plugin)
		require.NotNil(t, p, tc.plugin)
		conf := pt.Config(t, map[string]any{"cniVersion": "1.1.0", "name": "missing", "type": tc.plugin}, tc.keys)
		withPrev := pt.WithKeys(t, conf, map[string]any{"prevResult": prev})
		calls := map[string][]byte{"ADD": conf, "CHECK": withPrev}
		if tc.meta {
			calls["ADD"] = withPrev
		}
		if tc.noCheck {
			delete(calls, "CHECK")
		}
		for cmd, config := range calls {
			t.Run(tc.plugin+"/"+cmd, func(t *testing.T) {
				_, err := pt.Invoke(t, host, p, pt.Call{Command: cmd, ContainerID: "missing-1", Netns: missing, IfName: "eth0", Config: config})
				require.Error(t, err)
				assert.Equal(t, cnierror.CodeUnknownContainer, cnierror.Code(err), "%v", err)
				assert.Contains(t, err.Error(), "CNI_NETNS", "names the variable")
			})
		}
	}
}
