package bandwidth

import (
	"os"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// badLimits are limits ADD refuses (a burst without a rate).
const badLimits = `"ingressBurst":400000,"egressRate":8000000,"egressBurst":1`

func TestExecdDelIgnoresTheLimits(t *testing.T) {
	t.Parallel()
	plugin := testns.LinkPlugin(t, "bandwidth")
	host, a := newAttached(t, "ctr-bad")

	o := execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", badLimits, a.prev))
	require.True(t, pt.AssertFailed(t, o, cnierror.CodeInvalidConfig))

	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path, conf("net1", badLimits, ""))
	assert.Equal(t, 0, o.Exit, "DEL of the failed attachment: %s", o)

	// An attachment shaped with good limits is cleaned by a DEL whose limits went bad.
	o = execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", bothLimits, a.prev))
	require.Equal(t, 0, o.Exit, o.String())
	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path,
		conf("net1", `"ingressRate":"fast","egressBurst":-1`, `{"not":"a result"}`))
	assert.Equal(t, 0, o.Exit, o.String())
	assertIfb(t, host, ifbName("net1", a.cid), false, "ifb gone after DEL")
}

// TestExecdDelFinishesOnAVethNeverSetUp is the DEL after an ADD killed between creating
// the veth pair and setting its host end up: that end keeps the kernel's built-in noop
// qdisc, to which the kernel answers no qdisc GET, and DEL asked for the root qdisc
// with NLM_F_ECHO alone and waited for ever (issue 36). pt.Exec's deadline makes the old
// code fail here instead of hanging.
func TestExecdDelFinishesOnAVethNeverSetUp(t *testing.T) {
	t.Parallel()
	testns.RequireRoot(t)
	plugin := testns.LinkPlugin(t, "bandwidth")
	host, cont := testns.NewWithLoopback(t), testns.NewWithLoopback(t)
	f, err := os.Open(cont.Path)
	require.NoError(t, err)
	defer f.Close()
	// The pair as the killed ADD left it: both ends down, the host end's qdisc noop.
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vethdown"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(f.Fd())}
	require.NoError(t, host.Handle(t).LinkAdd(v))
	veth := hostLink(t, host, "vethdown")
	kind, err := qdiscKindShown(host, veth.Attrs().Index)
	require.NoError(t, err)
	require.Empty(t, kind, "the premise: a veth end never set up has the built-in noop qdisc, which no dump lists")

	o := execBandwidth(t, host, plugin, "DEL", "ctr-down", cont.Path,
		[]byte(`{"cniVersion":"1.1.0","name":"n","type":"bandwidth"}`))
	assert.Equal(t, 0, o.Exit, o.String())
	assert.NotNil(t, pt.LinkIn(t, host, "vethdown"), "DEL leaves the veth to its main plugin")
}

// qdiscKindShown is the kind of the root qdisc a dump lists for the link with index
// ifindex in host, "" when it lists none.
func qdiscKindShown(host *testns.NS, ifindex int) (string, error) {
	var kind string
	err := host.Do(func() error {
		qs, err := netlink.QdiscList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: ifindex}})
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT {
				kind = q.Type()
			}
		}
		return err
	})
	return kind, err
}
