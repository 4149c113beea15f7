package lockedns

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/nlconn"
)

// ReservedTable reports the tables the kernel keeps for itself (unspec, default, main,
// local): a rule of a plugin's pointing at one would reroute every packet of the
// namespace, and a DEL would delete the rule by it.
func ReservedTable(t int64) bool { return t == 0 || t >= 253 && t <= 255 }

// CheckTable refuses a configured routing table the kernel has no room for or reserves.
func CheckTable(t int64) error {
	if t < 0 || t > 1<<32-1 || ReservedTable(t) {
		return cnierror.Newf(cnierror.CodeInvalidConfig,
			"table: %d is not a usable routing table (1-4294967295, not 253-255)", t)
	}
	return nil
}

// UsedTables returns every table a rule points at or a route is in: a table chosen as
// free (FreeTable, under the namespace's lock) must be in neither, or it would share
// another's routes.
func UsedTables(h *nlconn.Handle) (map[int]bool, error) {
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list rules: %w", err)
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	used := make(map[int]bool, len(rules)+len(routes))
	for _, r := range rules {
		used[r.Table] = true
	}
	for _, r := range routes {
		used[r.Table] = true
	}
	return used, nil
}

// FreeTable returns the first table from `from` (at least 1) up that used does not
// hold and the kernel does not reserve. It always finds one within len(used)+3 steps,
// far below the kernel's limit of 2^32-1.
func FreeTable(used map[int]bool, from int) int {
	t := from
	for used[t] || ReservedTable(int64(t)) {
		t++
	}
	return t
}
