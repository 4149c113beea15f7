package bandwidth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestDelUnshapesAHostVethThatOutlivesTheAttachment: the host end of the container's
// veth is not always deleted with the attachment (host-device moves one end of a veth
// the host keeps; a main plugin of another project may keep its host end), so "the
// host veth's qdiscs go with the veth" does not hold. DEL with the netns there takes
// off the root tbf and the ingress qdisc (with its redirect) that ADD put on it; the
// link kept a 1 Mbit limit and an ingress filter redirecting to a deleted ifb for ever.
// The reference refuses such an ADD (no host interface in prevResult).
func TestDelUnshapesAHostVethThatOutlivesTheAttachment(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	for name, limits := range map[string]string{
		"both":         bothLimits,
		"ingress only": `"ingressRate":16000000,"ingressBurst":400000`,
		"egress only":  `"egressRate":8000000,"egressBurst":200000`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			host, a := newAttached(t, "ctr-outlive")
			hh := host.Handle(t)
			_, err := a.call(t, host, "ADD", limits)
			require.NoError(t, err)
			veth := hostLink(t, host, a.hostVeth)
			require.NotEqual(t, []string{"noqueue"}, qdiscKinds(t, hh, veth), "premise: ADD shaped the host veth")

			_, err = a.call(t, host, "DEL", limits)
			require.NoError(t, err)
			assert.Equal(t, []string{"noqueue"}, qdiscKinds(t, hh, veth), "the veth has the kernel's default qdisc only")
			assertIfb(t, host, ifbName("net1", a.cid), false, "ifb deleted")
			_, err = a.call(t, host, "DEL", limits)
			assert.NoError(t, err, "second DEL")
		})
	}
}

// TestDelLeavesQdiscsBandwidthDidNotMake: a host veth whose root qdisc is another kind
// (an operator's htb, say) keeps it, and so does a clsact (an eBPF datapath's); only a
// root tbf and an ingress qdisc with a redirect are ADD's.
func TestDelLeavesQdiscsBandwidthDidNotMake(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-other")
	hh := host.Handle(t)
	veth := hostLink(t, host, a.hostVeth)
	require.NoError(t, hh.QdiscAdd(netlink.NewHtb(netlink.QdiscAttrs{
		LinkIndex: veth.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)})))
	addClsact(t, hh, veth)

	_, err := a.call(t, host, "DEL", bothLimits)
	require.NoError(t, err)
	assert.Equal(t, []string{"htb", "clsact"}, qdiscKinds(t, hh, veth))
}

// addClsact gives the link a clsact qdisc, as an eBPF datapath does.
func addClsact(t *testing.T, h *netlink.Handle, l netlink.Link) {
	t.Helper()
	require.NoError(t, h.QdiscAdd(&netlink.GenericQdisc{QdiscType: "clsact", QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_CLSACT, Handle: netlink.MakeHandle(0xffff, 0)}}))
}

// qdiscKinds lists the kinds of the link's root and ingress qdiscs.
func qdiscKinds(t *testing.T, h *netlink.Handle, l netlink.Link) []string {
	t.Helper()
	qs, err := h.QdiscList(l)
	require.NoError(t, err)
	var kinds []string
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT || a.Parent == netlink.HANDLE_INGRESS {
			kinds = append(kinds, q.Type())
		}
	}
	return kinds
}

// TestAddKeepsAClsactOnTheHostVeth: a clsact on the host veth belongs to another
// program (an eBPF datapath chained before bandwidth); ADD used to delete it to put its
// ingress qdisc there, silently cutting that program off the pod's traffic. It now
// fails (as the reference's ADD does, on the kernel's EEXIST) and leaves the clsact and
// nothing of its own; an ingress qdisc with the redirect of an earlier ADD is still
// replaced.
func TestAddKeepsAClsactOnTheHostVeth(t *testing.T) {
	t.Parallel()
	host, a := newAttached(t, "ctr-clsact")
	hh := host.Handle(t)
	veth := hostLink(t, host, a.hostVeth)
	addClsact(t, hh, veth)

	_, err := a.call(t, host, "ADD", bothLimits)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "clsact")
	assert.Equal(t, []string{"noqueue", "clsact"}, qdiscKinds(t, hh, veth), "the clsact stays, the tbf is undone")
	assertIfb(t, host, ifbName("net1", a.cid), false, "no ifb left")
}
