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

// Delete removes, in the calling thread's network namespace, every entry of the family
// (v6 or not) that any of the matches selects, with one table dump. It returns how many
// entries went.
func Delete(v6 bool, matches []Match) (uint, error) {
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
	n, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, filters...)
	if err != nil {
		return n, fmt.Errorf("conntrack: delete entries: %w", err)
	}
	return n, nil
}
