package hostlocal

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
)

// ipRange is one pool: addresses Start..End (inclusive) of Subnet, Gateway never handed out.
type ipRange struct {
	Subnet  netip.Prefix
	Start   netip.Addr
	End     netip.Addr
	Gateway netip.Addr
}

// contains reports whether a is allocatable territory of r (Start..End inside Subnet).
func (r ipRange) contains(a netip.Addr) bool {
	return r.Subnet.Contains(a) && r.Start.Compare(a) <= 0 && a.Compare(r.End) <= 0
}

// overlaps reports whether two pools share an address.
func (r ipRange) overlaps(o ipRange) bool {
	if r.Start.Is4() != o.Start.Is4() {
		return false
	}
	return r.contains(o.Start) || r.contains(o.End) || o.contains(r.Start) || o.contains(r.End)
}

func (r ipRange) String() string { return r.Start.String() + "-" + r.End.String() }

// size returns the number of addresses Start..End, saturated at maxUint64.
func (r ipRange) size() uint64 {
	s, e := r.Start.As16(), r.End.As16()
	hiS, loS := binary.BigEndian.Uint64(s[:8]), binary.BigEndian.Uint64(s[8:])
	hiE, loE := binary.BigEndian.Uint64(e[:8]), binary.BigEndian.Uint64(e[8:])
	if hiE != hiS && (hiE-hiS > 1 || loE >= loS) {
		return ^uint64(0)
	}
	n := loE - loS // wraps correctly when hiE == hiS+1 and loE < loS
	if n == ^uint64(0) {
		return n
	}
	return n + 1
}

// rangeSet is a list of pools of one family from which one address is allocated.
type rangeSet []ipRange

func (s rangeSet) contains(a netip.Addr) bool { return s.index(a) >= 0 }

// index is the position of the pool that holds a, -1 when none does.
func (s rangeSet) index(a netip.Addr) int {
	return slices.IndexFunc(s, func(r ipRange) bool { return r.contains(a) })
}

// rangeFor returns the pool that holds a.
func (s rangeSet) rangeFor(a netip.Addr) (ipRange, bool) {
	if i := s.index(a); i >= 0 {
		return s[i], true
	}
	return ipRange{}, false
}

func (s rangeSet) overlaps(o rangeSet) bool {
	return slices.ContainsFunc(s, func(r ipRange) bool { return slices.ContainsFunc(o, r.overlaps) })
}

func (s rangeSet) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// iterator walks a range set the way the reference allocator does: from the address
// after the last reserved one (or from the first pool's start), pool by pool, wrapping
// around, skipping gateways, and stopping after one full lap.
type iterator struct {
	set   rangeSet
	idx   int
	cur   netip.Addr
	start netip.Addr
}

// newIterator starts after last when last lies in the set, else at the first pool's start.
func newIterator(set rangeSet, last netip.Addr) *iterator {
	if i := set.index(last); i >= 0 {
		return &iterator{set: set, idx: i, cur: last}
	}
	return &iterator{set: set, start: set[0].Start}
}

// next returns the next candidate and its pool, or false after a full lap.
func (it *iterator) next() (netip.Addr, ipRange, bool) {
	for {
		r := it.set[it.idx]
		first := !it.cur.IsValid()
		switch {
		case first:
			// No last reserved address: Start itself is the first candidate (and start).
			it.cur = r.Start
		case it.cur == r.End:
			it.idx = (it.idx + 1) % len(it.set)
			r = it.set[it.idx]
			it.cur = r.Start
		default:
			it.cur = it.cur.Next()
		}
		if !first && it.cur == it.start {
			return netip.Addr{}, ipRange{}, false
		}
		if !it.start.IsValid() {
			it.start = it.cur
		}
		if it.cur == r.Gateway {
			continue
		}
		return it.cur, r, true
	}
}
