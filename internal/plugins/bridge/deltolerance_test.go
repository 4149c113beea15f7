package bridge_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestExecdDelIgnoresSettingsItDoesNotNeed: a DEL whose config ADD would refuse (or
// whose teardown keys are unreadable) still undoes everything an earlier ADD did, so
// that a runtime's DEL of the chain can finish.
func TestExecdDelIgnoresSettingsItDoesNotNeed(t *testing.T) {
	t.Parallel()
	base := map[string]any{"ipMasq": true, "ipMasqBackend": "nftables", "macspoofchk": true}
	for _, tc := range []struct {
		name string
		keys map[string]any
	}{
		{"settings ADD refuses", map[string]any{"mtu": 5, "vlan": 99999, "hairpinMode": true, "promiscMode": true,
			"bridge": "no/such bridge", "args": map[string]any{"cni": map[string]any{"mac": "zz"}}}},
		{"unreadable teardown keys", map[string]any{"ipMasq": "yes", "macspoofchk": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			dir := testns.LinkPluginDir(t, "bridge", "host-local")
			good := w.conf(base)
			badKeys := map[string]any{}
			for k, v := range base {
				badKeys[k] = v
			}
			for k, v := range tc.keys {
				badKeys[k] = v
			}
			bad := w.conf(badKeys)
			c := &container{ns: testns.NewWithLoopback(t), id: "ctr-tolerant"}
			out, err := w.execPlugin(dir, "bridge", "ADD", c.id, c.ns.Path, good)
			require.NoError(t, err)
			c.res, err = result.Parse([]byte(out), "1.1.0")
			require.NoError(t, err)
			require.True(t, w.masqPresent(c, netfilter.NFTables), "premise: masqueraded")
			require.NotZero(t, w.spoofRules(), "premise: spoof check set up")

			_, err = w.execPlugin(dir, "bridge", "ADD", "ctr-other", testns.New(t).Path, bad)
			require.Error(t, err, "premise: ADD refuses this config")
			_, err = w.execPlugin(dir, "bridge", "DEL", c.id, c.ns.Path, bad)
			require.NoError(t, err)
			assert.Empty(t, w.reservations())
			assert.Empty(t, hostVeths(w.hostLinks()))
			assert.False(t, w.masqPresent(c, netfilter.NFTables), "masquerade removed")
			assert.Zero(t, w.spoofRules(), "spoof check removed")
		})
	}
}
