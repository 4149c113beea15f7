package link_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// veths creates n veth pairs "eth<i>" in cont with their peers in host.
func veths(t testing.TB, host, cont *link.NS, n int) {
	t.Helper()
	for i := range n {
		_, err := link.CreateVeth(host, cont, link.VethOptions{IfName: fmt.Sprintf("eth%d", i)})
		require.NoError(t, err)
	}
}

func ifb(t testing.TB, n *testns.NS, name string) {
	t.Helper()
	require.NoError(t, n.Handle(t).LinkAdd(&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name}}))
}

func TestDeleteInBackgroundIsDoneWhenThePendingIs(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	veths(t, host, cont, 2)
	ifb(t, hostNS, "ifb-test")

	var p background.Pending
	ctx := background.WithPending(context.Background(), &p)
	require.NoError(t, cont.DeleteInBackground(ctx, "eth0"))
	require.NoError(t, cont.DeleteInBackground(ctx, "eth1"))
	// The caller's handle may be closed at once: the deletion holds its own.
	h, err := link.Open(hostNS.Path)
	require.NoError(t, err)
	require.NoError(t, h.DeleteInBackground(ctx, "ifb-test"))
	h.Close()
	require.NoError(t, cont.DeleteInBackground(ctx, "never-existed"))
	require.NoError(t, p.Wait())

	links, err := contNS.Handle(t).LinkList()
	require.NoError(t, err)
	assert.Len(t, links, 1, "only lo is left in the container")
	links, err = hostNS.Handle(t).LinkList()
	require.NoError(t, err)
	assert.Len(t, links, 1, "the peers and the ifb are gone from the host")
}

func TestDeleteInBackgroundOutsideAProcessDeletesAtOnce(t *testing.T) {
	t.Parallel()
	_, contNS, host, cont := pair(t)
	veths(t, host, cont, 1)
	require.NoError(t, cont.DeleteInBackground(context.Background(), "eth0"))
	_, err := contNS.Handle(t).LinkByName("eth0")
	assert.True(t, link.IsNotFound(err), "deleted before the call returned: %v", err)
}

// BenchmarkDeleteVethAndIfb is the DEL of one attachment of the standard chain as far
// as the kernel is concerned: a container veth and a host ifb, one after the other
// (as before) and in the background of one process (now).
func BenchmarkDeleteVethAndIfb(b *testing.B) {
	for _, mode := range []string{"in turn", "background"} {
		b.Run(mode, func(b *testing.B) {
			testns.RequireRoot(b)
			hostNS, contNS := testns.New(b), testns.New(b)
			host, err := link.Open(hostNS.Path)
			require.NoError(b, err)
			defer host.Close()
			cont, err := link.Open(contNS.Path)
			require.NoError(b, err)
			defer cont.Close()
			for b.Loop() {
				b.StopTimer()
				veths(b, host, cont, 1)
				ifb(b, hostNS, "ifb-bench")
				b.StartTimer()
				if mode == "in turn" {
					require.NoError(b, cont.Delete("eth0"))
					require.NoError(b, host.Delete("ifb-bench"))
					continue
				}
				var p background.Pending
				ctx := background.WithPending(context.Background(), &p)
				require.NoError(b, cont.DeleteInBackground(ctx, "eth0"))
				require.NoError(b, host.DeleteInBackground(ctx, "ifb-bench"))
				require.NoError(b, p.Wait())
			}
		})
	}
}
