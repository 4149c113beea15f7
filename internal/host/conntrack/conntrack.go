// Package conntrack removes connection-tracking entries over netlink. A NAT decision is
// taken once per connection and remembered in its conntrack entry, so when a port
// mapping changes, flows that were set up under the old rules (UDP above all, which
// never "closes") keep going to the old destination until their entries are deleted.
package conntrack

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nlconn"
)

// Match selects entries by their original-direction destination port and protocol
// and, when ReplySrc is set, by the address that answers (the DNAT target).
type Match struct {
	Proto       uint8
	OrigDstPort uint16
	ReplySrc    netip.Addr
}

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (m Match) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	if f.Forward.Protocol != m.Proto || f.Forward.DstPort != m.OrigDstPort {
		return false
	}
	if !m.ReplySrc.IsValid() {
		return true
	}
	src, ok := netip.AddrFromSlice(f.Reverse.SrcIP)
	return ok && src.Unmap() == m.ReplySrc
}

// Delete removes the entries of the calling thread's network namespace that any of
// matches selects, in the family v6 says, and returns how many went. The kernel walks
// its whole table for it (a dump, filtered here), however few entries match.
func Delete(v6 bool, matches []Match) (uint, error) {
	return deleteWith(netlink.ConntrackDeleteFilters, v6, matches)
}

// Table is the conntrack table of one network namespace, held open so that deletions
// can run on any goroutine: whatever the namespace of the thread they land on, they
// reach the one the table was opened in.
type Table struct {
	h nlconn.Handle
}

// OpenCurrent opens the table of the calling thread's network namespace.
func OpenCurrent() (*Table, error) {
	ns, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("conntrack: current namespace: %w", err)
	}
	defer ns.Close()
	h, err := nlconn.Open(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("conntrack: netlink: %w", err)
	}
	return &Table{h: h}, nil
}

// Delete is the package's Delete on the table's namespace.
func (t *Table) Delete(v6 bool, matches []Match) (uint, error) {
	return deleteWith(t.h.ConntrackDeleteFilters, v6, matches)
}

// Close releases the table's socket.
func (t *Table) Close() { t.h.Close() }

// deleteWith is Delete through del: the package's netlink handle, or a table's.
func deleteWith(del func(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error),
	v6 bool, matches []Match) (uint, error) {
	if len(matches) == 0 {
		return 0, nil
	}
	family := netlink.InetFamily(syscall.AF_INET)
	if v6 {
		family = netlink.InetFamily(syscall.AF_INET6)
	}
	filters := make([]netlink.CustomConntrackFilter, len(matches))
	for i, m := range matches {
		filters[i] = m
	}
	n, err := del(netlink.ConntrackTable, family, filters...)
	if err != nil {
		return n, fmt.Errorf("conntrack: delete entries: %w", err)
	}
	return n, nil
}
