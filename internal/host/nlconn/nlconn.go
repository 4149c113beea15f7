// Package nlconn opens the netlink handles and sockets the plugins talk to the kernel
// through, each with a deadline on its sends and receives: a request the kernel never
// answers (a qdisc GET without NLM_F_ACK for a link whose qdisc is the kernel's built-in
// noop, issue 36) then fails with EAGAIN after Timeout instead of blocking a DEL for
// ever. vishvananda/netlink's handles have no deadline unless asked; its package-level
// functions have 60 s. The deadline costs nothing per request: the library's sockets are
// non-blocking and wait in Go's poller, which takes the deadline without a syscall.
//
// Every handle and raw request of production code goes through here: Open for a
// Handle, Execute for a hand-built request (which asks for an ack or is a dump, so that
// the kernel always answers it); TestEveryNetlinkHandleOfOursIsOpenedHere holds the
// rest of the module to it. A Handle's dumps retry an interrupted answer (dump.go), so
// no call site can forget to. The package-level functions of vishvananda/netlink (a
// socket per call, 60 s deadline) and google/nftables' connections (every message of a
// batch acked, every read a dump) are answered or bounded without it.
package nlconn

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Timeout bounds each send and each receive on our netlink sockets. The kernel does a
// request's work inside the send (waiting for the rtnl lock of a busy node, or for RCU,
// there), so a slow request is not cut short: its answer is queued when the send
// returns. Ten seconds without a byte after that is a request the kernel will never
// answer.
const Timeout = 10 * time.Second

// Open opens a netlink handle bound to the namespace ns (netns.None() for the calling
// thread's), with a socket for each of families, every one with the deadline. The
// Handle is a value (one pointer), so that wrapping the netlink handle costs no
// allocation: keep it in a variable or a field and pass its address.
func Open(ns netns.NsHandle, families ...int) (Handle, error) {
	h, err := netlink.NewHandleAt(ns, families...)
	if err != nil {
		return Handle{}, err
	}
	if err := h.SetSocketTimeout(Timeout); err != nil {
		h.Close()
		return Handle{}, fmt.Errorf("netlink handle: deadline: %w", err)
	}
	return Handle{h}, nil
}

// Execute sends req on a socket of protocol proto opened in the namespace ns
// (netns.None() for the calling thread's), with the deadline, and returns the answer's
// messages of type resType. A request that is no dump is sent with NLM_F_ACK, so that
// the kernel ends its answer even when it has nothing to say: the answer is then the
// message asked for (before the ack, which is left unread) or none.
func Execute(ns netns.NsHandle, req *nl.NetlinkRequest, proto int, resType uint16) ([][]byte, error) {
	return execute(ns, Timeout, req, proto, resType)
}

func execute(ns netns.NsHandle, timeout time.Duration, req *nl.NetlinkRequest, proto int, resType uint16) ([][]byte, error) {
	sock, err := socket(ns, proto, timeout)
	if err != nil {
		return nil, err
	}
	defer sock.Close()
	if req.Flags&unix.NLM_F_DUMP != unix.NLM_F_DUMP {
		req.Flags |= unix.NLM_F_ACK
	}
	req.Sockets = map[int]*nl.SocketHandle{proto: {Socket: sock}}
	msgs, err := req.Execute(proto, resType)
	if errors.Is(err, unix.EAGAIN) {
		return nil, fmt.Errorf("netlink: no answer from the kernel within %s: %w", timeout, err)
	}
	return msgs, err
}

// socket opens a netlink socket of protocol proto in ns with the deadline.
func socket(ns netns.NsHandle, proto int, timeout time.Duration) (*nl.NetlinkSocket, error) {
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), proto)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	// Both setters only store the value (no syscall): Send and Receive wait in the poller.
	_ = sock.SetSendTimeout(&tv)
	_ = sock.SetReceiveTimeout(&tv)
	return sock, nil
}
