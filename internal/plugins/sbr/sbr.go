// Package sbr is the source-based routing plugin: a chained plugin for a container's
// second (third...) interface that makes traffic from that interface's addresses leave
// by that interface. Per address of CNI_IFNAME it adds a rule "from <ip> lookup <table>";
// unless a table is configured, each address gets a table of its own (the first id from
// 100 up that no rule or route uses, chosen under a lock on the namespace), holding a
// default route via the gateway and the interface's routes that serve the address,
// which leave the main table (the others, such as the other family's, stay).
//
// Unlike the reference, DEL deletes only rules pointing from the interface's addresses
// (prevResult's too, so a vanished interface is no obstacle), succeeds without the
// namespace, puts the routes it moved back into main when the interface outlives it,
// and CHECK really checks the rules and routes.
package sbr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the sbr plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "sbr",
		About:    "source-based routing: traffic from an interface's addresses leaves by that interface",
		Versions: version.All(),
		Add:      add,
		Del:      del,
		Check:    check,
	}
}

var errNotChained = cnierror.New(cnierror.CodeInvalidConfig, "prevResult: sbr must be called as a chained plugin")

// prepare validates what ADD and CHECK share: the config and the interface's addresses.
// An interface with no address, in prevResult or the kernel, gets none routed: the
// reference accepts that when prevResult has addresses on other interfaces, and so do
// we, saying so on stderr; a prevResult with no address at all it refuses, as we do.
func prepare(req *skel.Request) (*Plan, []result.IPConfig, error) {
	p, err := plan(req)
	if err != nil {
		return nil, nil, err
	}
	if req.PrevResult == nil {
		return nil, nil, errNotChained
	}
	ips, err := link.ContainerIPs(req.Args.Netns, req.Args.IfName, req.PrevResult)
	if err != nil {
		return nil, nil, err
	}
	if len(ips) == 0 && len(req.PrevResult.IPs) == 0 {
		return nil, nil, cnierror.Newf(cnierror.CodeInvalidConfig,
			"prevResult: no addresses at all, and interface %q has none", req.Args.IfName)
	}
	if len(ips) == 0 && req.Stderr != nil {
		fmt.Fprintf(req.Stderr, "sbr: interface %q has no address, in prevResult or the kernel: nothing to route (prevResult's addresses are on other interfaces)\n", req.Args.IfName)
	}
	return p, ips, nil
}

// add routes the interface's addresses by source and passes prevResult on.
func add(req *skel.Request) (*result.Result, error) {
	p, ips, err := prepare(req)
	if err != nil {
		return nil, err
	}
	if len(ips) == 0 {
		return req.PrevResult.Clone(), nil
	}
	return lockedns.Add(req, func(cont *link.NS) error {
		return wrap(req, configure(req.Context(), cont, req.Args.IfName, ips, p))
	})
}

// configure does ADD's work inside the locked namespace; a failure undoes every step.
// Each address's rule and routes, and each route moved out of main, is a step (Routes)
// of its own, so that a crash-point build stops between any two (internal/core/steps).
func configure(ctx context.Context, cont *link.NS, ifName string, ips []result.IPConfig, p *Plan) (err error) {
	l, err := cont.ByName(ifName)
	if err != nil {
		return err
	}
	h := cont.Handle()
	var undo rollback.Stack
	defer undo.OnError(&err)
	if p.Table != 0 {
		for _, ip := range ips {
			if err := steps.Begin(ctx, steps.Routes).Done(addRule(h, &undo, ip.Address.Addr(), p.Table)); err != nil {
				return err
			}
		}
		return nil
	}
	used, err := lockedns.UsedTables(h)
	if err != nil {
		return err
	}
	mainRoutes, err := h.RouteList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	table := firstTable
	for _, ip := range ips {
		table = lockedns.FreeTable(used, table)
		used[table] = true
		if err := steps.Begin(ctx, steps.Routes).Done(routeAddress(h, &undo, l, ip, p.gateway(ip), table, mainRoutes)); err != nil {
			return err
		}
	}
	// Removed from main only now, as several addresses may share a subnet route; and
	// only those copied, so the other family's routes (fe80::/64) stay.
	moved := servingAny(mainRoutes, ips)
	for _, r := range moved {
		if err := steps.Begin(ctx, steps.Routes).Done(h.RouteDel(&r)); err != nil {
			return fmt.Errorf("move route %s out of main: %w", describe(r), err)
		}
		undo.Push("route "+describe(r)+" back into main", func() error { r.Flags = 0; return h.RouteAdd(&r) })
	}
	if p.AddSourceHints {
		return steps.Begin(ctx, steps.Routes).Done(addSourceHints(h, &undo, l, ips, moved))
	}
	return nil
}

// routeAddress gives one address its table: the rule, the address's routes and a
// default route via gw.
func routeAddress(h *nlconn.Handle, undo *rollback.Stack, l netlink.Link, ip result.IPConfig, gw netip.Addr, table int, mainRoutes []netlink.Route) error {
	addr := ip.Address.Addr()
	if err := addRule(h, undo, addr, table); err != nil {
		return err
	}
	for _, r := range mainRoutes {
		if !belongsTo(r, ip.Address) {
			continue
		}
		r.Table, r.Flags = table, 0 // flags of a kernel-made route make the add fail
		if err := replaceRoute(h, undo, &r); err != nil {
			return err
		}
	}
	if !gw.IsValid() || movesDefault(mainRoutes, ip, gw) {
		return nil
	}
	def := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: link.IPNet(netip.PrefixFrom(zero(addr), 0)),
		Gw: net.IP(gw.AsSlice()), Table: table, Protocol: protoSBR}
	return replaceRoute(h, undo, def)
}

func isDefault(r netlink.Route) bool {
	dst, ok := link.Prefix(r.Dst)
	return !ok || dst.Bits() == 0
}

// prevRoutesByDefault reports whether prev (nil: unknown, so yes) has a default route of
// the family.
func prevRoutesByDefault(prev *result.Result, fam int) bool {
	return prev == nil || slices.ContainsFunc(prev.Routes, func(r result.Route) bool {
		return r.Dst.Bits() == 0 && familyOf(r.Dst.Addr()) == fam
	})
}

// protoSBR marks the routes the plugin adds itself (a table's default route that main
// did not have, the addSourceHints routes) as opposed to those it moves out of main:
// DEL deletes the former and puts the latter back into main. (A default route main had
// through the interface with another gateway than the configured one is replaced, and
// DEL cannot put it back.)
const protoSBR netlink.RouteProtocol = 83

// movesDefault reports whether main already routes ip's family by default via gw through
// the interface: that route moves into ip's table as it is, and serves as its default.
func movesDefault(mainRoutes []netlink.Route, ip result.IPConfig, gw netip.Addr) bool {
	return slices.ContainsFunc(mainRoutes, func(r netlink.Route) bool {
		return isDefault(r) && addrOf(r.Gw) == gw && belongsTo(r, ip.Address)
	})
}

// belongsTo says whether a main-table route of the interface serves the address: its
// source or gateway is in the address's subnet, or it names neither (a plain subnet or
// link route). Unlike the reference, a route of the other family never does.
func belongsTo(r netlink.Route, ip netip.Prefix) bool {
	if family(r) != familyOf(ip.Addr()) {
		return false
	}
	src, gw := addrOf(r.Src), addrOf(r.Gw)
	subnet := ip.Masked()
	return !src.IsValid() && !gw.IsValid() || src.IsValid() && subnet.Contains(src) || gw.IsValid() && subnet.Contains(gw)
}

// servingAny returns the routes that serve one of ips (see belongsTo): those
// routeAddress copied into the addresses' tables.
func servingAny(routes []netlink.Route, ips []result.IPConfig) []netlink.Route {
	var out []netlink.Route
	for _, r := range routes {
		if slices.ContainsFunc(ips, func(ip result.IPConfig) bool { return belongsTo(r, ip.Address) }) {
			out = append(out, r)
		}
	}
	return out
}

// addSourceHints puts each address's subnet routes back into main with the address as
// preferred source, so unbound sockets reaching that subnet pick the address (and so
// its rule).
func addSourceHints(h *nlconn.Handle, undo *rollback.Stack, l netlink.Link, ips []result.IPConfig, moved []netlink.Route) error {
	for _, ip := range ips {
		addr := ip.Address.Addr()
		for _, r := range moved {
			dst, ok := link.Prefix(r.Dst)
			if r.Gw != nil || !ok || dst.Bits() == 0 || !dst.Contains(addr) {
				continue
			}
			hint := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: r.Dst, Src: net.IP(addr.AsSlice()),
				Scope: netlink.SCOPE_LINK, Protocol: protoSBR}
			if err := replaceRoute(h, undo, hint); err != nil {
				return err
			}
		}
	}
	return nil
}

func addRule(h *nlconn.Handle, undo *rollback.Stack, addr netip.Addr, table int) error {
	rule := hostRule(addr, table)
	if err := h.RuleAdd(rule); err != nil {
		return fmt.Errorf("add rule from %s lookup %d: %w", addr, table, err)
	}
	undo.Push(fmt.Sprintf("rule from %s lookup %d", addr, table), func() error { return h.RuleDel(rule) })
	return nil
}

func hostRule(addr netip.Addr, table int) *netlink.Rule {
	rule := netlink.NewRule()
	rule.Family = familyOf(addr)
	rule.Src = link.IPNet(netip.PrefixFrom(addr, addr.BitLen()))
	rule.Table = table
	return rule
}

func replaceRoute(h *nlconn.Handle, undo *rollback.Stack, r *netlink.Route) error {
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("add route %s to table %d: %w", describe(*r), r.Table, err)
	}
	undo.Push("route "+describe(*r), func() error { return h.RouteDel(r) })
	return nil
}

// del removes the rules from the interface's addresses (those prevResult names and
// those it still has) and, for tables the plugin chose, the interface's routes in them,
// which go back into main (see putBack). There is nothing to do without the namespace.
func del(req *skel.Request) error {
	return lockedns.Del(req, "sbr", tableForDel, func(cont *link.NS, table int) error { return wrap(req, tidy(cont, req, table)) })
}

// wrap names the interface in an error of the work inside the namespace.
func wrap(req *skel.Request, err error) error {
	if err != nil {
		return fmt.Errorf("sbr %s: %w", req.Args.IfName, err)
	}
	return nil
}

// tidy is DEL's work inside the locked namespace, best effort.
func tidy(cont *link.NS, req *skel.Request, table int) error {
	h := cont.Handle()
	addrs := map[netip.Addr]bool{}
	if req.PrevResult != nil {
		for _, ip := range req.PrevResult.ContainerIPs(req.Args.IfName) {
			addrs[ip.Address.Addr()] = true
		}
	}
	l, err := cont.ByName(req.Args.IfName)
	if err != nil && !link.IsNotFound(err) {
		return err
	}
	if l != nil {
		if err := addAddrs(h, l, addrs); err != nil {
			return err
		}
	}
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list rules: %w", err)
	}
	var errs []error
	chosen := map[int]bool{}
	for _, r := range rules {
		if !ours(r, addrs, table) {
			continue
		}
		if err := h.RuleDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete rule from %s lookup %d: %w", r.Src, r.Table, err))
		}
		if table == 0 {
			chosen[r.Table] = true
		}
	}
	if l != nil {
		putBack(h, l, chosen, req.PrevResult, req.Stderr)
		errs = append(errs, flushTables(h, l, chosen))
	}
	return errors.Join(errs...)
}

// putBack gives main back the interface's routes ADD moved into the tables it chose,
// and takes out of main the routes ADD added there (addSourceHints), for an interface
// that outlives the DEL. The routes this plugin adds carry protoSBR; the reference's
// default route carries no mark, so an unmarked default route goes back into main only
// when the main plugin's result (prev) routes that family by default, or there is no
// result to tell. Best effort, each failure said on stderr: the rules are gone once DEL
// returns, so a retried DEL could not find these tables again.
func putBack(h *nlconn.Handle, l netlink.Link, tables map[int]bool, prev *result.Result, stderr io.Writer) {
	note := func(err error) {
		if stderr != nil {
			fmt.Fprintf(stderr, "sbr: %s: %v\n", l.Attrs().Name, err)
		}
	}
	mainRoutes, err := tableRoutes(h, l, unix.RT_TABLE_MAIN, netlink.FAMILY_ALL)
	if err != nil {
		note(err)
	}
	for _, r := range mainRoutes {
		if r.Protocol == protoSBR {
			if err := h.RouteDel(&r); err != nil && !errors.Is(err, errNoSuchRoute) {
				note(fmt.Errorf("delete source hint %s: %w", describe(r), err))
			}
		}
	}
	moved := toMove(h, l, tables, prev, note)
	// Routes through a gateway need the subnet route that reaches it first.
	slices.SortStableFunc(moved, func(a, b netlink.Route) int { return cmp.Compare(len(a.Gw), len(b.Gw)) })
	for _, r := range moved {
		r.Table, r.Flags = unix.RT_TABLE_MAIN, 0
		if err := h.RouteAdd(&r); err != nil && !errors.Is(err, unix.EEXIST) {
			note(fmt.Errorf("put route %s back into main: %w", describe(r), err))
		}
	}
}

// toMove are the interface's routes in tables that go back into main: not ours, and a
// default route only as putBack says.
func toMove(h *nlconn.Handle, l netlink.Link, tables map[int]bool, prev *result.Result, note func(error)) []netlink.Route {
	var moved []netlink.Route
	for t := range tables {
		routes, err := tableRoutes(h, l, t, netlink.FAMILY_ALL)
		if err != nil {
			note(err)
		}
		for _, r := range routes {
			if r.Protocol != protoSBR && (!isDefault(r) || prevRoutesByDefault(prev, family(r))) {
				moved = append(moved, r)
			}
		}
	}
	return moved
}

// ours says whether rule r is one this plugin made for one of addrs: from a single
// address of them, to the configured table or (none configured) to a non-reserved one.
func ours(r netlink.Rule, addrs map[netip.Addr]bool, table int) bool {
	src, ok := link.Prefix(r.Src)
	if !ok || !src.IsSingleIP() || !addrs[src.Addr()] {
		return false
	}
	if table != 0 {
		return r.Table == table
	}
	return !lockedns.ReservedTable(int64(r.Table))
}

func addAddrs(h *nlconn.Handle, l netlink.Link, into map[netip.Addr]bool) error {
	have, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range have {
		if p, ok := link.Prefix(a.IPNet); ok {
			into[p.Addr()] = true
		}
	}
	return nil
}

// flushTables deletes l's routes in the given tables, which the plugin chose and so owns.
func flushTables(h *nlconn.Handle, l netlink.Link, tables map[int]bool) error {
	var errs []error
	for t := range tables {
		routes, err := tableRoutes(h, l, t, netlink.FAMILY_ALL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range routes {
			if err := h.RouteDel(&r); err != nil && !errors.Is(err, errNoSuchRoute) {
				errs = append(errs, fmt.Errorf("delete route %s from table %d: %w", describe(r), t, err))
			}
		}
	}
	return errors.Join(errs...)
}

// check verifies a rule from every address and, in tables the plugin chose, the
// address's subnet route and the default route via its gateway.
func check(req *skel.Request) error {
	p, ips, err := prepare(req)
	if err != nil || len(ips) == 0 {
		return err
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	l, err := cont.ByName(req.Args.IfName)
	if err != nil {
		return fmt.Errorf("sbr: %w", err)
	}
	h := cont.Handle()
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("sbr: list rules: %w", err)
	}
	for _, ip := range ips {
		addr := ip.Address.Addr()
		r := findRule(rules, addr, p.Table)
		if r == nil {
			return fmt.Errorf("sbr %s: no rule from %s", req.Args.IfName, addr)
		}
		if p.Table != 0 {
			continue
		}
		if err := verifyTable(h, l, r.Table, ip, p.gateway(ip)); err != nil {
			return fmt.Errorf("sbr %s: %w", req.Args.IfName, err)
		}
	}
	return nil
}

func findRule(rules []netlink.Rule, addr netip.Addr, table int) *netlink.Rule {
	one := map[netip.Addr]bool{addr: true}
	for i := range rules {
		if ours(rules[i], one, table) {
			return &rules[i]
		}
	}
	return nil
}

// verifyTable checks table for ip's subnet route and its default route via gw.
func verifyTable(h *nlconn.Handle, l netlink.Link, table int, ip result.IPConfig, gw netip.Addr) error {
	routes, err := tableRoutes(h, l, table, familyOf(ip.Address.Addr()))
	if err != nil {
		return err
	}
	subnet := ip.Address.Masked()
	var haveSubnet, haveDefault bool
	for _, r := range routes {
		dst, ok := link.Prefix(r.Dst)
		if !ok {
			dst = netip.PrefixFrom(zero(ip.Address.Addr()), 0)
		}
		haveSubnet = haveSubnet || dst == subnet
		haveDefault = haveDefault || dst.Bits() == 0 && addrOf(r.Gw) == gw
	}
	if !subnet.IsSingleIP() && !haveSubnet {
		return fmt.Errorf("table %d: no route to %s", table, subnet)
	}
	if gw.IsValid() && !haveDefault {
		return fmt.Errorf("table %d: no default route via %s", table, gw)
	}
	return nil
}
