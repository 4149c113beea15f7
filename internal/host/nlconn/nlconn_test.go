package nlconn

import (
	"os"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestHandleGivesEverySocketTheDeadline reads the timeouts of the handle's sockets,
// which netlink keeps unexported: a handle opened without them waits for ever on a
// request the kernel does not answer.
func TestHandleGivesEverySocketTheDeadline(t *testing.T) {
	t.Parallel()
	testns.RequireRoot(t)
	h, err := Open(nsOf(t, testns.New(t)), unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER)
	require.NoError(t, err)
	defer h.Close()
	sockets := reflect.ValueOf(h.Handle).Elem().FieldByName("sockets")
	sockets = reflect.NewAt(sockets.Type(), unsafe.Pointer(sockets.UnsafeAddr())).Elem()
	require.Equal(t, 2, sockets.Len())
	for it := sockets.MapRange(); it.Next(); {
		send, receive := it.Value().Interface().(*nl.SocketHandle).Socket.GetTimeouts()
		assert.Equal(t, Timeout, send, "send timeout of family %d", it.Key().Int())
		assert.Equal(t, Timeout, receive, "receive timeout of family %d", it.Key().Int())
	}
}

// TestARequestTheKernelNeverAnswersFailsAtTheDeadline sends the request of issue 36 as
// bandwidth sent it (a root qdisc GET with NLM_F_ECHO alone, for a link never set up,
// whose built-in noop qdisc the kernel does not announce) on one of our sockets: it
// fails with EAGAIN once the deadline passes.
func TestARequestTheKernelNeverAnswersFailsAtTheDeadline(t *testing.T) {
	t.Parallel()
	n, index := downVeth(t)
	sock, err := socket(n, unix.NETLINK_ROUTE, 100*time.Millisecond)
	require.NoError(t, err)
	defer sock.Close()
	req := qdiscGet(index)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}

	_, err = within(t, func() ([][]byte, error) { return req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC) })
	assert.ErrorIs(t, err, unix.EAGAIN)
}

// TestExecuteAsksForTheAckThatEndsAnEmptyAnswer sends the same request through
// Execute, which adds NLM_F_ACK: the kernel's ack ends an answer without a qdisc.
func TestExecuteAsksForTheAckThatEndsAnEmptyAnswer(t *testing.T) {
	t.Parallel()
	n, index := downVeth(t)
	msgs, err := within(t, func() ([][]byte, error) {
		return execute(n, time.Minute, qdiscGet(index), unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	})
	require.NoError(t, err)
	assert.Empty(t, msgs)
}

// within runs request and returns its answer, failing the test when it has not
// returned after 20 s.
func within(t *testing.T, request func() ([][]byte, error)) ([][]byte, error) {
	t.Helper()
	type answer struct {
		msgs [][]byte
		err  error
	}
	done := make(chan answer, 1)
	go func() { msgs, err := request(); done <- answer{msgs, err} }()
	select {
	case a := <-done:
		return a.msgs, a.err
	case <-time.After(20 * time.Second):
		t.Fatal("the request still blocks after 20 s")
		return nil, nil
	}
}

// qdiscGet is a GET of the root qdisc of the link with that index, with NLM_F_ECHO
// alone.
func qdiscGet(index int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_ECHO)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(index), Parent: netlink.HANDLE_ROOT})
	return req
}

// downVeth makes a namespace of the test's own holding a veth pair never set up, and
// returns it and the index of one end.
func downVeth(t *testing.T) (netns.NsHandle, int) {
	t.Helper()
	testns.RequireRoot(t)
	host, cont := testns.New(t), testns.New(t)
	f, err := os.Open(cont.Path)
	require.NoError(t, err)
	defer f.Close()
	h := host.Handle(t)
	require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vdown"}, PeerName: "eth0",
		PeerNamespace: netlink.NsFd(f.Fd())}))
	l, err := h.LinkByName("vdown")
	require.NoError(t, err)
	return nsOf(t, host), l.Attrs().Index
}

func nsOf(t *testing.T, n *testns.NS) netns.NsHandle {
	t.Helper()
	fd, err := netns.GetFromPath(n.Path)
	require.NoError(t, err)
	t.Cleanup(func() { fd.Close() })
	return fd
}
