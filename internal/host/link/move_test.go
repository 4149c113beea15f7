package link_test

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// renameSides names the three ways of Relocate for a move from host to cont.
func renameSides(host, cont *link.NS) map[string]*link.NS {
	return map[string]*link.NS{"in the target": cont, "in the source": host, "in a temporary netns": nil}
}

// namesSeen records every name a link carries in notifications inside n until stop.
func namesSeen(t *testing.T, n *testns.NS) (stop func() map[string]bool) {
	t.Helper()
	updates, done := make(chan netlink.LinkUpdate, 64), make(chan struct{})
	require.NoError(t, netlink.LinkSubscribeAt(nsHandle(t, n), updates, done))
	seen := map[string]bool{}
	return func() map[string]bool {
		// Notifications come in order: once lo's going up is seen, all of the finished
		// steps' are, however late the subscriber reads them. (An alias change would be
		// announced only for a link that is up.)
		h := n.Handle(t)
		lo, err := h.LinkByName("lo")
		require.NoError(t, err)
		require.Zero(t, lo.Attrs().Flags&net.FlagUp, "the mark is lo going up")
		require.NoError(t, h.LinkSetUp(lo))
		timeout := time.After(10 * time.Second)
		for marked := false; !marked; {
			select {
			case u := <-updates:
				if u.Attrs().Name == "lo" {
					marked = u.Attrs().Flags&net.FlagUp != 0
				} else {
					seen[u.Attrs().Name] = true
				}
			case <-timeout:
				t.Fatal("the mark's notification never came")
			}
		}
		close(done)
		for range updates {
		}
		return seen
	}
}

func TestRelocateRenamesIntoTheOtherNamespace(t *testing.T) {
	for _, side := range []string{"in the target", "in the source", "in a temporary netns"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel()
			hostNS, contNS, host, cont := pair(t)
			testns.Veth(t, hostNS, "dev0", nil, testns.New(t), "peer0", nil)
			// A link of the device's old name in the target does not matter.
			testns.Veth(t, contNS, "dev0", nil, testns.New(t), "peer1", nil)
			stop := namesSeen(t, hostNS)

			l, err := link.Relocate(link.Relocation{From: host, To: cont, Name: "dev0", NewName: "eth0", Alias: "dev0",
				RenameIn: renameSides(host, cont)[side]})
			require.NoError(t, err)
			assert.Equal(t, "eth0", l.Attrs().Name)
			assert.Equal(t, "dev0", l.Attrs().Alias)
			assert.Zero(t, l.Attrs().Flags&net.FlagUp, "arrives down")
			_, err = hostNS.Handle(t).LinkByName("dev0")
			assert.Error(t, err)
			seen := stop()
			if side != "in the source" {
				assert.False(t, seen["eth0"], "the host never sees the new name")
			}

			back, err := link.Relocate(link.Relocation{From: cont, To: host, Name: "eth0", NewName: "dev0", RenameIn: cont})
			require.NoError(t, err)
			assert.Empty(t, back.Attrs().Alias)
		})
	}
}

func TestRelocateIntoTheHostShowsItOnlyItsName(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	testns.Veth(t, contNS, "eth0", nil, testns.New(t), "peer0", nil)
	stop := namesSeen(t, hostNS)
	_, err := link.Relocate(link.Relocation{From: cont, To: host, Name: "eth0", NewName: "ens5", RenameIn: cont})
	require.NoError(t, err)
	assert.Equal(t, map[string]bool{"ens5": true}, stop())
}

func TestRelocateFallsBackToATemporaryNetnsWhenTheNameIsTakenInTheSource(t *testing.T) {
	t.Parallel()
	_, contNS, host, cont := pair(t)
	testns.Veth(t, contNS, "eth0", nil, testns.New(t), "peer0", nil)
	testns.Veth(t, contNS, "ens5", nil, testns.New(t), "peer1", nil)
	l, err := link.Relocate(link.Relocation{From: cont, To: host, Name: "eth0", NewName: "ens5", RenameIn: cont})
	require.NoError(t, err)
	assert.Equal(t, "ens5", l.Attrs().Name)
}

func TestRelocateFailingPutsTheLinkBackAsItWas(t *testing.T) {
	for _, side := range []string{"in the target", "in the source", "in a temporary netns"} {
		for _, taken := range []string{"new name only", "both names"} {
			t.Run(fmt.Sprintf("%s, %s taken", side, taken), func(t *testing.T) {
				t.Parallel()
				hostNS, contNS, host, cont := pair(t)
				testns.Veth(t, hostNS, "dev0", nil, testns.New(t), "peer0", nil)
				h := hostNS.Handle(t)
				l, err := h.LinkByName("dev0")
				require.NoError(t, err)
				require.NoError(t, h.LinkSetAlias(l, "keep me"))
				testns.Veth(t, contNS, "eth0", nil, testns.New(t), "peer1", nil)
				if taken == "both names" {
					testns.Veth(t, contNS, "dev0", nil, testns.New(t), "peer2", nil)
				}

				_, err = link.Relocate(link.Relocation{From: host, To: cont, Name: "dev0", NewName: "eth0", Alias: "dev0",
					RenameIn: renameSides(host, cont)[side]})
				require.ErrorIs(t, err, syscall.EEXIST)
				l, err = h.LinkByName("dev0")
				require.NoError(t, err, "back under its old name")
				assert.Equal(t, "keep me", l.Attrs().Alias)
				assert.NotZero(t, l.Attrs().Flags&net.FlagUp, "up again")
				cl, err := contNS.Handle(t).LinkByName("eth0")
				require.NoError(t, err)
				assert.Empty(t, cl.Attrs().Alias, "the container's own eth0 is untouched")
			})
		}
	}
}

func nsHandle(t *testing.T, n *testns.NS) netns.NsHandle {
	t.Helper()
	h, err := netns.GetFromPath(n.Path)
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	return h
}
