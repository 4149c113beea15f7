package hostiletest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// kernelRefusedIfNames are CNI_IFNAMEs the kernel refuses to name a link with, so that
// no ADD, ours or the reference's, can have made them.
var kernelRefusedIfNames = map[string]string{
	"16 bytes":   strings.Repeat("e", 16),
	"slash":      "a/b",
	"colon":      "a:b",
	"whitespace": "a b",
	"dot":        ".",
	"dot dot":    "..",
}

// TestDelOfAnIfNameTheKernelRefusesSucceedsAndAddRefusesIt: for every plugin of the
// registry, exec'd, ADD of such a name is code 4 naming CNI_IFNAME, and DEL, which was
// refused the same way (and so failed for ever, as the reference's still does), succeeds
// without doing anything, twice, with the plugin's working config.
func TestDelOfAnIfNameTheKernelRefusesSucceedsAndAddRefusesIt(t *testing.T) {
	t.Parallel()
	var names []string
	for _, p := range dispatch.Registry() {
		names = append(names, p.Name)
	}
	for _, plugin := range names {
		t.Run(plugin, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			dir := testns.LinkPluginDir(t, names...)
			c := n.NewContainer()
			conf := n.mainConf(plugin)
			hostBefore := n.hostLinks()
			for label, ifName := range kernelRefusedIfNames {
				call := plugintest.Call{Bin: filepath.Join(dir, plugin), Command: skel.CmdAdd, ContainerID: c.ID,
					Netns: c.NS.Path, IfName: ifName, Config: conf}
				err := plugintest.Exec(t, n.Host, call).CNIError()
				require.NotNil(t, err, "%s: ADD", label)
				assert.Equal(t, cnierror.CodeInvalidEnv, err.Code, "%s: ADD: %s", label, describe(err))
				assert.Contains(t, err.Msg, "CNI_IFNAME", "%s: ADD", label)
				call.Command = skel.CmdDel
				for i := range 2 {
					err = plugintest.Exec(t, n.Host, call).CNIError()
					assert.Nil(t, err, "%s: DEL %d: %s", label, i+1, describe(err))
				}
			}
			assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
			assert.Equal(t, hostBefore, n.hostLinks())
			assert.Empty(t, n.Reservations())
			assert.Empty(t, n.flannelStored())
		})
	}
}
