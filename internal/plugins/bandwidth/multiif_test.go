package bandwidth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// egressState is what the first attachment's egress shaping consists of in the kernel.
type egressState struct {
	ifbIndex   int
	alias      string
	tbf        tbfParams
	redirIndex int
}

func readEgress(t *testing.T, host *testns.NS, ifbName, hostVeth string) egressState {
	t.Helper()
	hh := host.Handle(t)
	ifb, err := hh.LinkByName(ifbName)
	require.NoError(t, err, "ifb %s", ifbName)
	tbf, err := rootTBF(linkNS(t, host), ifb)
	require.NoError(t, err)
	veth := hostLink(t, host, hostVeth)
	filters, err := hh.FilterList(veth, netlink.MakeHandle(0xffff, 0))
	require.NoError(t, err)
	require.Len(t, filters, 1)
	u32, ok := filters[0].(*netlink.U32)
	require.True(t, ok, "filter is u32")
	return egressState{ifbIndex: ifb.Attrs().Index, alias: ifb.Attrs().Alias, tbf: tbf, redirIndex: u32.RedirIndex}
}

func TestSecondInterfaceOfAContainerLeavesTheFirstsIfbAlone(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	host := testns.NewWithLoopback(t)
	eth0 := attach(t, host, "ctr-multi", 1)
	eth1 := eth0.join(t, host, "eth1")
	name := ifbName("net1", eth0.cid)

	_, err := invoke(t, host, "ADD", eth0.cid, eth0.cont.Path, conf("net1", bothLimits, eth0.prev))
	require.NoError(t, err)
	before := readEgress(t, host, name, eth0.hostVeth)
	assert.Equal(t, "cni-bandwidth net=net1 id=ctr-multi if=eth0", before.alias)
	assert.Equal(t, before.ifbIndex, before.redirIndex)

	// The reference's ifb name holds one ifb per container and network: eth1 is refused.
	_, err = invokeIf(t, host, "ADD", eth1.cid, "eth1", eth1.cont.Path, conf("net1", bothLimits, eth1.prev))
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, `"eth0"`, `"eth1"`)
	assert.Equal(t, before, readEgress(t, host, name, eth0.hostVeth), "eth0's ifb, tbf and redirect untouched")
	veth1 := hostLink(t, host, eth1.hostVeth)
	_, err = rootTBF(linkNS(t, host), veth1)
	assert.Error(t, err, "the failed ADD undid eth1's ingress tbf")
	_, err = invoke(t, host, "CHECK", eth0.cid, eth0.cont.Path, conf("net1", bothLimits, eth0.prev))
	assert.NoError(t, err, "CHECK of eth0 after eth1's ADD")

	// The runtime cleans up the failed attachment; eth0's ifb is not eth1's to delete.
	_, err = invokeIf(t, host, "DEL", eth1.cid, "eth1", "", conf("net1", bothLimits, ""))
	require.NoError(t, err)
	assert.Equal(t, before, readEgress(t, host, name, eth0.hostVeth), "eth1's DEL left eth0's ifb")
	_, err = invoke(t, host, "CHECK", eth0.cid, eth0.cont.Path, conf("net1", bothLimits, eth0.prev))
	assert.NoError(t, err, "CHECK of eth0 after eth1's DEL")

	gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"bandwidth",` +
		`"cni.dev/valid-attachments":[{"containerID":"ctr-multi","ifname":"eth0"}]}`)
	_, err = invoke(t, host, "GC", "", "", gcConf)
	require.NoError(t, err)
	assert.Equal(t, before, readEgress(t, host, name, eth0.hostVeth), "GC with eth0 valid keeps its ifb")

	_, err = invoke(t, host, "DEL", eth0.cid, "", conf("net1", bothLimits, ""))
	require.NoError(t, err)
	assertIfb(t, host, name, false, "eth0's own DEL removes the ifb")
}

// hostWithIfb is a host namespace of the test's own holding the ifb bandwidth names for
// cid on net1, with alias, and that ifb's name.
func hostWithIfb(t *testing.T, cid, alias string) (*testns.NS, string) {
	t.Helper()
	host := testns.NewWithLoopback(t)
	name := ifbName("net1", cid)
	addIfb(t, host, name, alias)
	return host, name
}

// addIfb puts an ifb with the given alias ("" for none, as the reference leaves it) in host.
func addIfb(t *testing.T, host *testns.NS, name, alias string) {
	t.Helper()
	hh := host.Handle(t)
	require.NoError(t, hh.LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name}}))
	if alias == "" {
		return
	}
	l := hostLink(t, host, name)
	require.NoError(t, hh.LinkSetAlias(l, alias))
}

func TestDelRemovesAnIfbOnlyForItsOwnInterface(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	tests := []struct {
		name, alias, delIf string
		removed            bool
	}{
		{"own interface", "cni-bandwidth net=net1 id=ctr-del if=eth0", "eth0", true},
		{"another interface", "cni-bandwidth net=net1 id=ctr-del if=eth0", "eth1", false},
		{"older alias without interface", "cni-bandwidth net=net1 id=ctr-del", "eth1", true},
		{"reference ifb without alias", "", "eth1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, name := hostWithIfb(t, "ctr-del", tt.alias)
			_, err := invokeIf(t, host, "DEL", "ctr-del", tt.delIf, "", conf("net1", bothLimits, ""))
			require.NoError(t, err)
			assertIfb(t, host, name, !tt.removed, "the ifb")
		})
	}
}

func TestGCKeepsAnIfbByContainerAndInterface(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	tests := []struct {
		name, alias, validCID, validIf string
		kept                           bool
	}{
		{"interface valid", "cni-bandwidth net=net1 id=ctr-gc if=eth0", "ctr-gc", "eth0", true},
		{"only another interface valid", "cni-bandwidth net=net1 id=ctr-gc if=eth0", "ctr-gc", "eth1", false},
		{"older alias, container valid", "cni-bandwidth net=net1 id=ctr-gc", "ctr-gc", "eth1", true},
		{"older alias, container gone", "cni-bandwidth net=net1 id=ctr-gc", "ctr-else", "eth0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host, name := hostWithIfb(t, "ctr-gc", tt.alias)
			gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"bandwidth",` +
				`"cni.dev/valid-attachments":[{"containerID":"` + tt.validCID + `","ifname":"` + tt.validIf + `"}]}`)
			_, err := invoke(t, host, "GC", "", "", gcConf)
			require.NoError(t, err)
			assertIfb(t, host, name, tt.kept, "the ifb")
		})
	}
}

func TestAddTakesOverOurOlderIfbOfTheContainer(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-upgrade")
	name := ifbName("net1", a.cid)
	addIfb(t, host, name, "cni-bandwidth net=net1 id=ctr-upgrade")

	_, err := a.call(t, host, "ADD", bothLimits)
	require.NoError(t, err)
	got := readEgress(t, host, name, a.hostVeth)
	assert.Equal(t, "cni-bandwidth net=net1 id=ctr-upgrade if=eth0", got.alias)
	_, err = a.call(t, host, "CHECK", bothLimits)
	assert.NoError(t, err)
}
