package nlconn

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// Handle is a netlink handle whose dumps retry an answer the kernel flags as interrupted
// by a concurrent change (NLM_F_DUMP_INTR), as the reference's netlinksafe.Handle does:
// the partial answer may miss entries, and on a busy host interruptions are routine.
// Every other request is the embedded netlink.Handle's own.
//
// To read a kind of object this type does not dump yet (neighbours, classes, ...), add
// its method here as the others are written, through retry: a dump of the
// embedded handle called from elsewhere fails TestNoDumpOfOursBypassesTheRetry.
type Handle struct {
	*netlink.Handle
}

// The dumps below are the embedded handle's, each run through retry.
func (h *Handle) LinkList() ([]netlink.Link, error) { return retry(h.Handle.LinkList) }
func (h *Handle) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	return retry(func() ([]netlink.Addr, error) { return h.Handle.AddrList(l, family) })
}
func (h *Handle) RouteList(l netlink.Link, family int) ([]netlink.Route, error) {
	return retry(func() ([]netlink.Route, error) { return h.Handle.RouteList(l, family) })
}
func (h *Handle) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	return retry(func() ([]netlink.Route, error) { return h.Handle.RouteListFiltered(family, filter, mask) })
}
func (h *Handle) RuleList(family int) ([]netlink.Rule, error) {
	return retry(func() ([]netlink.Rule, error) { return h.Handle.RuleList(family) })
}
func (h *Handle) FilterList(l netlink.Link, parent uint32) ([]netlink.Filter, error) {
	return retry(func() ([]netlink.Filter, error) { return h.Handle.FilterList(l, parent) })
}
func (h *Handle) QdiscList(l netlink.Link) ([]netlink.Qdisc, error) {
	return retry(func() ([]netlink.Qdisc, error) { return h.Handle.QdiscList(l) })
}

// retry runs a dump again while the kernel flags its answer as interrupted. After
// dumpTries interrupted answers the last one is used as it is, as the reference's
// netlinksafe does: a node whose links or routes never stop changing must not fail
// every ADD with "interrupted system call" (upstream #1121).
func retry[T any](dump func() ([]T, error)) ([]T, error) {
	var (
		out []T
		err error
	)
	for range dumpTries {
		out, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return out, nil
}

// dumpTries bounds retry, as the reference's five.
const dumpTries = 5
