package testns

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Veth links a and b with a veth pair: aName in a and bName in b, each end up with its
// addresses ("10.1.0.1/24", "fd01::1/64"). The addresses skip duplicate address
// detection, so they are usable at once. The pair goes with the namespaces.
func Veth(t testing.TB, a *NS, aName string, aAddrs []string, b *NS, bName string, bAddrs []string) {
	t.Helper()
	f, err := os.Open(b.Path)
	if err != nil {
		t.Fatalf("testns: veth %s-%s: %v", aName, bName, err)
	}
	defer f.Close()
	ha := a.Handle(t)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(f.Fd())}
	if err := ha.LinkAdd(v); err != nil {
		t.Fatalf("testns: veth %s-%s: %v", aName, bName, err)
	}
	for _, end := range []struct {
		h     *netlink.Handle
		name  string
		addrs []string
	}{{ha, aName, aAddrs}, {b.Handle(t), bName, bAddrs}} {
		if err := upWithAddrs(end.h, end.name, end.addrs); err != nil {
			t.Fatalf("testns: %v", err)
		}
	}
}

// Up sets the link called name inside n up, with addrs (no DAD).
func Up(t testing.TB, n *NS, name string, addrs ...string) {
	t.Helper()
	if err := upWithAddrs(n.Handle(t), name, addrs); err != nil {
		t.Fatalf("testns: %v", err)
	}
}

func upWithAddrs(h *netlink.Handle, name string, addrs []string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, s := range addrs {
		addr, err := netlink.ParseAddr(s)
		if err != nil {
			return err
		}
		addr.Flags = unix.IFA_F_NODAD
		if err := h.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("%s: add %s: %w", name, s, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s: set up: %w", name, err)
	}
	return nil
}

// Route adds a route to dst ("10.2.0.0/16") via gw through dev inside n.
func Route(t testing.TB, n *NS, dev, dst, gw string) {
	t.Helper()
	_, d, err := net.ParseCIDR(dst)
	if err != nil {
		t.Fatalf("testns: route %s: %v", dst, err)
	}
	addRoute(t, n, dev, d, gw)
}

// DefaultRoutes gives n a default route via each of gws (one per family) through dev:
// an "external" peer routed through the host.
func DefaultRoutes(t testing.TB, n *NS, dev string, gws ...string) {
	t.Helper()
	for _, gw := range gws {
		addRoute(t, n, dev, nil, gw)
	}
}

func addRoute(t testing.TB, n *NS, dev string, dst *net.IPNet, gw string) {
	t.Helper()
	h := n.Handle(t)
	l, err := h.LinkByName(dev)
	if err != nil {
		t.Fatalf("testns: route via %s: %s: %v", gw, dev, err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP(gw)}); err != nil {
		t.Fatalf("testns: route %v via %s: %v", dst, gw, err)
	}
}
