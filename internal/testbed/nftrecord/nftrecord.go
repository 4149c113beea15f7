// Package nftrecord is a test aid that records what a process asks of nf_tables through
// google/nftables while passing every message on to the kernel, so that a test can
// assert on what a plugin sent (no transaction for an attachment that has nothing, no
// sweep, one batch per DEL) instead of on how long it took. The connections it makes
// talk to the network namespace of the thread that first uses them.
package nftrecord

import (
	"fmt"
	"sync"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// Request is one message sent to nf_tables: a batch's begin or end marker, or an
// nf_tables message (its NFT_MSG_* type).
type Request struct {
	// Batch is true for the NFNL_MSG_BATCH_BEGIN that opens a transaction.
	Batch bool
	// Msg is the NFT_MSG_* type of an nf_tables message (NFT_MSG_GETRULE, …).
	Msg uint16
	// Dump tells a dump (NLM_F_DUMP) from a lookup of one object.
	Dump bool
}

func (r Request) String() string {
	if r.Batch {
		return "batch"
	}
	name, ok := msgNames[r.Msg]
	if !ok {
		name = fmt.Sprintf("msg %d", r.Msg)
	}
	if r.Dump {
		name += " (dump)"
	}
	return name
}

var msgNames = map[uint16]string{
	unix.NFT_MSG_NEWTABLE: "newtable", unix.NFT_MSG_GETTABLE: "gettable", unix.NFT_MSG_DELTABLE: "deltable",
	unix.NFT_MSG_NEWCHAIN: "newchain", unix.NFT_MSG_GETCHAIN: "getchain", unix.NFT_MSG_DELCHAIN: "delchain",
	unix.NFT_MSG_NEWRULE: "newrule", unix.NFT_MSG_GETRULE: "getrule", unix.NFT_MSG_DELRULE: "delrule",
	unix.NFT_MSG_NEWSET: "newset", unix.NFT_MSG_GETSET: "getset", unix.NFT_MSG_DELSET: "delset",
	unix.NFT_MSG_NEWSETELEM: "newsetelem", unix.NFT_MSG_GETSETELEM: "getsetelem", unix.NFT_MSG_DELSETELEM: "delsetelem",
	unix.NFT_MSG_GETGEN: "getgen",
}

// Recorder passes messages through to the kernel and keeps a list of them. Its zero
// value is ready; Close releases the kernel socket.
type Recorder struct {
	mu   sync.Mutex
	kern *netlink.Conn
	sent []Request
	// received counts the messages the kernel answered with: what a dump of a node's
	// foreign tables costs shows here, not in what was sent.
	received int
}

// Option makes an nftables connection go through the recorder:
// nftables.New(nftables.AsLasting(), r.Option()).
func (r *Recorder) Option() nftables.ConnOption {
	return nftables.WithTestDial(r.pass)
}

// pass is the fake socket's whole behaviour: what the library sends goes to the kernel
// (recorded); a receive with nothing buffered (req nil) reads the kernel's answer.
func (r *Recorder) pass(req []netlink.Message) ([]netlink.Message, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kern == nil {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
		if err != nil {
			return nil, err
		}
		r.kern = c
	}
	if req != nil {
		for _, m := range req {
			if m.Header.Type != unix.NFNL_MSG_BATCH_END {
				r.sent = append(r.sent, request(m))
			}
		}
		_, err := r.kern.SendMessages(req)
		return nil, err
	}
	msgs, err := r.kern.Receive()
	r.received += len(msgs)
	for i := range msgs {
		// The fake socket's Conn checks replies against its own port id, and reads on
		// while a reply is multi-part: the kernel socket has read every part already.
		msgs[i].Header.PID = nltest.PID
		msgs[i].Header.Flags &^= netlink.Multi
	}
	return msgs, err
}

func request(m netlink.Message) Request {
	t := uint16(m.Header.Type)
	if t == unix.NFNL_MSG_BATCH_BEGIN {
		return Request{Batch: true}
	}
	return Request{Msg: t & 0xff, Dump: m.Header.Flags&netlink.Dump == netlink.Dump}
}

// Sent returns what was sent since the last Reset, batch end markers left out.
func (r *Recorder) Sent() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.sent...)
}

// Batches counts the transactions in sent.
func Batches(sent []Request) int {
	n := 0
	for _, q := range sent {
		if q.Batch {
			n++
		}
	}
	return n
}

// Received returns how many messages the kernel answered with since the last Reset:
// one per object a dump holds, plus acknowledgements.
func (r *Recorder) Received() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received
}

// Reset forgets what was sent and received so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent, r.received = nil, 0
}

// Close closes the kernel socket.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kern == nil {
		return nil
	}
	err := r.kern.Close()
	r.kern = nil
	return err
}
