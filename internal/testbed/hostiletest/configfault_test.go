package hostiletest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestKernelRefusalsOfTheConfigAreInvalidConfigNamingTheField: where the kernel refuses
// what the config asks for (a child link on lo, the all-zero MAC, a second passthru
// macvlan, shaping an interface that is no veth, a data dir that is a file), ADD answered
// with the kernel's bare error as code 999. It is the config's fault: code 7 naming the
// field, and nothing of the failed ADD is left.
func TestKernelRefusalsOfTheConfigAreInvalidConfigNamingTheField(t *testing.T) {
	t.Parallel()
	const zeroMAC = "00:00:00:00:00:00"
	for _, tc := range []struct {
		name, plugin, field string
		keys                map[string]any
		// before attaches what the refused ADD meets (nil: nothing); it returns the
		// prevResult the refused ADD is chained after, if any.
		before func(n *node) *result.Result
	}{
		{name: "macvlan on lo", plugin: "macvlan", field: "master", keys: map[string]any{"master": "lo"}},
		{name: "ipvlan on lo", plugin: "ipvlan", field: "master", keys: map[string]any{"master": "lo"}},
		{name: "vlan on lo", plugin: "vlan", field: "master", keys: map[string]any{"master": "lo", "vlanId": 7}},
		{name: "macvlan with the zero MAC", plugin: "macvlan", field: "mac", keys: map[string]any{"master": attachmenttest.Master, "mac": zeroMAC}},
		{name: "tap with the zero MAC", plugin: "tap", field: "mac", keys: map[string]any{"mac": zeroMAC}},
		{name: "bridge with the zero MAC", plugin: "bridge", field: "args.cni.mac",
			keys: map[string]any{"bridge": "hbr0", "args": map[string]any{"cni": map[string]any{"mac": zeroMAC}}}},
		{name: "second passthru macvlan", plugin: "macvlan", field: "mode",
			keys: map[string]any{"master": attachmenttest.Master, "mode": "passthru"},
			before: func(n *node) *result.Result {
				n.attach("macvlan", map[string]any{"master": attachmenttest.Master, "mode": "passthru"})
				return nil
			}},
		{name: "macvlan beside a passthru one", plugin: "macvlan", field: "mode",
			keys: map[string]any{"master": attachmenttest.Master, "mode": "bridge"},
			before: func(n *node) *result.Result {
				n.attach("macvlan", map[string]any{"master": attachmenttest.Master, "mode": "passthru"})
				return nil
			}},
		{name: "bandwidth on a macvlan", plugin: "bandwidth", field: "ingressRate",
			keys: map[string]any{"ingressRate": 1000000, "ingressBurst": 100000},
			before: func(n *node) *result.Result {
				return n.attach("macvlan", map[string]any{"master": attachmenttest.Master})
			}},
		{name: "host-device with dataDir a file", plugin: "host-device", field: "dataDir",
			keys: map[string]any{"device": "hd0"},
			before: func(n *node) *result.Result {
				testns.Veth(n.T, n.Host, "hd0", nil, n.Peer, "hd0p", nil)
				return nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			var prev *result.Result
			if tc.before != nil {
				prev = tc.before(n)
			}
			hostBefore := n.hostLinks()
			reserved := n.Reservations()
			keys := map[string]any{"ipam": n.hostLocal(attachmenttest.Subnet)}
			for k, v := range tc.keys {
				keys[k] = v
			}
			if tc.plugin == "host-device" {
				file := filepath.Join(t.TempDir(), "file")
				require.NoError(t, os.WriteFile(file, nil, 0o600))
				keys["dataDir"] = file
			}
			conf := n.conf(tc.plugin, keys)
			c := n.NewContainer()
			if prev != nil {
				c = n.last
				conf = plugintest.WithPrev(t, conf, prev)
			}
			_, err := n.exec(tc.plugin, skel.CmdAdd, c.ID, c.NS.Path, "eth0", conf)
			require.NotNil(t, err, "ADD")
			assert.Equal(t, cnierror.CodeInvalidConfig, err.Code, describe(err))
			assert.Contains(t, err.Msg, tc.field)
			if prev == nil {
				assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
			}
			assert.Equal(t, hostBefore, n.hostLinks())
			assert.Equal(t, reserved, n.Reservations())
		})
	}
}
