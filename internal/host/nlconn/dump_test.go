package nlconn

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// interrupted is a dump that the kernel flags as interrupted (NLM_F_DUMP_INTR) the
// first times times, with a partial answer, and then answers in full.
func interrupted(times int, calls *int) func() ([]string, error) {
	return func() ([]string, error) {
		*calls++
		if *calls <= times {
			return []string{"partial"}, netlink.ErrDumpInterrupted
		}
		return []string{"full", "answer"}, nil
	}
}

func TestRetryRetriesAnInterruptedDumpAndNeverFailsOnIt(t *testing.T) {
	calls := 0
	got, err := retry(interrupted(2, &calls))
	assert.NoError(t, err)
	assert.Equal(t, []string{"full", "answer"}, got)
	assert.Equal(t, 3, calls)

	calls = 0
	got, err = retry(interrupted(1000, &calls))
	assert.NoError(t, err, "an interruption is never an error: the last answer is used")
	assert.Equal(t, []string{"partial"}, got)
	assert.Equal(t, 5, calls, "bounded as the reference's netlinksafe")

	calls = 0
	boom := errors.New("boom")
	_, err = retry(func() ([]string, error) { calls++; return nil, boom })
	assert.ErrorIs(t, err, boom, "other errors are returned at once")
	assert.Equal(t, 1, calls)
}

// TestAHandlesDumpIsRetriedWhenABusyNamespaceInterruptsIt dumps the addresses of a
// namespace of the test's own while another handle keeps adding and removing one: the
// kernel flags many of the raw dumps as interrupted (the test first makes sure it
// does), and not one of the Handle's dumps fails with it.
func TestAHandlesDumpIsRetriedWhenABusyNamespaceInterruptsIt(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	h, err := Open(nsOf(t, n), unix.NETLINK_ROUTE)
	require.NoError(t, err)
	defer h.Close()
	churn := n.Handle(t)
	require.NoError(t, churn.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "many"}, PeerName: "churn"}))
	many, err := churn.LinkByName("many")
	require.NoError(t, err)
	other, err := churn.LinkByName("churn")
	require.NoError(t, err)
	// Enough addresses that a dump takes several reads, between which the churn lands.
	for i := range 1000 {
		ip := net.IPv4(10, 50, byte(i/250), byte(1+i%250))
		require.NoError(t, churn.AddrAdd(many, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)}}))
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 60, 0, 1), Mask: net.CIDRMask(32, 32)}}
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := churn.AddrAdd(other, a); err != nil {
				done <- err
				return
			}
			if err := churn.AddrDel(other, a); err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() { close(stop); require.NoError(t, <-done) }()

	const dumps = 100
	interrupted := 0
	for range dumps {
		if _, err := h.Handle.AddrList(nil, netlink.FAMILY_ALL); errors.Is(err, netlink.ErrDumpInterrupted) {
			interrupted++
		} else {
			require.NoError(t, err)
		}
	}
	require.NotZero(t, interrupted, "the churn interrupts raw dumps")
	t.Logf("%d of %d raw dumps interrupted", interrupted, dumps)
	for range dumps {
		addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
		require.NoError(t, err)
		assert.NotEmpty(t, addrs)
	}
}
