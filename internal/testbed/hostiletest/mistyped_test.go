package hostiletest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
)

// TestAMistypedIPAMIsRefusedByAddAndItsDelSucceeds: a key every plugin shares given the
// wrong JSON type ("ipam": "x") failed ADD and DEL alike with code 6, so the runtime's
// DEL of the pod failed for ever although ADD had made nothing. ADD refuses it with
// code 7 naming the key; DEL, which needs nothing of the config beyond the attachment,
// succeeds (twice), and nothing is left. The chain plugin likewise, for a child's
// mistyped ipam and its own.
func TestAMistypedIPAMIsRefusedByAddAndItsDelSucceeds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, plugin string
		keys         map[string]any
	}{
		{"bridge", "bridge", map[string]any{"bridge": "hbr0", "ipam": "x"}},
		{"ptp", "ptp", map[string]any{"ipam": "x"}},
		{"ptp ipam a list", "ptp", map[string]any{"ipam": []any{"host-local"}}},
		{"chain, a child's ipam", "chain", map[string]any{"plugins": []any{
			map[string]any{"type": "bridge", "bridge": "hbr0", "ipam": "x"}, map[string]any{"type": "tuning"}}}},
		{"chain, its own ipam", "chain", map[string]any{"ipam": "x", "plugins": []any{
			map[string]any{"type": "ptp", "ipam": map[string]any{"type": "host-local"}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			c := n.NewContainer()
			conf := n.conf(tc.plugin, tc.keys)

			_, err := n.exec(tc.plugin, skel.CmdAdd, c.ID, c.NS.Path, "eth0", conf)

			require.NotNil(t, err, "ADD")
			assert.Equal(t, cnierror.CodeInvalidConfig, err.Code, describe(err))
			assert.Contains(t, err.Msg, "ipam: must be an object")
			for i := range 2 {
				_, err = n.exec(tc.plugin, skel.CmdDel, c.ID, c.NS.Path, "eth0", conf)
				assert.Nil(t, err, "DEL %d: %s", i+1, describe(err))
			}
			assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
			assert.Empty(t, n.Reservations())
			assert.Empty(t, n.hostLinks(), "the refused ADD made nothing in the host")
		})
	}
}
