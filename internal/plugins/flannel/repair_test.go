package flannel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// TestRepairRunsTheDelegatesRepair: with FLANNEL_IPMASQ=false the delegate bridge
// masquerades; `nft flush ruleset` takes that away, a dry run names it under the
// delegate's type, and a repair with the stored delegate config puts it back.
func TestRepairRunsTheDelegatesRepair(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctr, res := w.addPod(t, fmt.Sprintf(v4Env, "false"))
	require.True(t, w.masqueraded("ctr-a", res))
	// `nft flush ruleset`, sent over netlink as nft sends it.
	w.host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		c.FlushRuleset()
		return c.Flush()
	})
	require.False(t, w.masqueraded("ctr-a", res))

	repair := func(dryRun bool) []string {
		var missing []string
		w.host.Run(t, func() error {
			var err error
			args := skel.Args{ContainerID: "ctr-a", Netns: ctr.Path, IfName: "eth0", Path: w.path, Env: os.Environ()}
			missing, err = skel.InvokeRepair(context.Background(), flannel.New(dispatch.Lookup), args, pt.WithPrev(t, w.conf(""), res), nil, dryRun)
			return err
		})
		return missing
	}
	missing := repair(true)
	require.Len(t, missing, 1)
	assert.True(t, strings.HasPrefix(missing[0], "bridge: ipMasq: masquerade check: "), missing[0])
	assert.False(t, w.masqueraded("ctr-a", res), "a dry run puts nothing back")
	assert.Equal(t, missing, repair(false))
	assert.True(t, w.masqueraded("ctr-a", res))
	assert.Empty(t, repair(false), "nothing is missing any more")
	_, err := w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
	require.NoError(t, err)
}
