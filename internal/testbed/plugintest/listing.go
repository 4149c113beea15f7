package plugintest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/nlconn"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// LinkList lists the links in n through an nlconn.Handle, whose dumps retry when a
// concurrent change interrupts them: links still come and go after a DEL (the kernel
// removes a gone container's veth peer when it frees the namespace, in its time), and a
// bare LinkList then fails now and then with "dump interrupted".
func LinkList(t testing.TB, n *testns.NS) []netlink.Link {
	t.Helper()
	links, err := (&nlconn.Handle{Handle: n.Handle(t)}).LinkList()
	require.NoError(t, err)
	return links
}

// Links returns the names of the links in n, sorted (listed as LinkList does).
func Links(t testing.TB, n *testns.NS) []string {
	t.Helper()
	links := LinkList(t, n)
	names := make([]string, 0, len(links))
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	slices.Sort(names)
	return names
}

// LinkIn returns the link called name inside n, nil when there is none.
func LinkIn(t testing.TB, n *testns.NS, name string) netlink.Link {
	t.Helper()
	l, err := n.Handle(t).LinkByName(name)
	var missing netlink.LinkNotFoundError
	if errors.As(err, &missing) {
		return nil
	}
	require.NoError(t, err, "look up %s", name)
	return l
}

// LinkAs returns the link called name inside n, which must exist and be a T (a
// *netlink.Macvlan, a *netlink.Tuntap, ...).
func LinkAs[T netlink.Link](t testing.TB, n *testns.NS, name string) T {
	t.Helper()
	l := LinkIn(t, n, name)
	require.NotNil(t, l, "%s exists", name)
	typed, ok := l.(T)
	require.True(t, ok, "%s is a %s", name, l.Type())
	return typed
}

// AddrsIn lists the addresses the kernel has on the link called name inside n (which
// must exist), as prefixes ("10.90.0.10/24"), sorted, IPv6 link-local ones left out:
// what a test compares with the addresses a result reports.
func AddrsIn(t testing.TB, n *testns.NS, name string) []string {
	t.Helper()
	l := LinkIn(t, n, name)
	require.NotNil(t, l, "%s exists", name)
	addrs, err := (&nlconn.Handle{Handle: n.Handle(t)}).AddrList(l, netlink.FAMILY_ALL)
	require.NoError(t, err)
	var out []string
	for _, a := range addrs {
		if !a.IP.IsLinkLocalUnicast() {
			out = append(out, a.IPNet.String())
		}
	}
	slices.Sort(out)
	return out
}

// AttrsIn returns the attributes of the link called name inside n, nil when there is
// none.
func AttrsIn(t testing.TB, n *testns.NS, name string) *netlink.LinkAttrs {
	t.Helper()
	if l := LinkIn(t, n, name); l != nil {
		return l.Attrs()
	}
	return nil
}

// Entries returns the names of the entries of dir, sorted; none when dir does not exist.
func Entries(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// RequireSameContent stops the test unless file got holds what file want holds, byte
// for byte.
func RequireSameContent(t testing.TB, want, got string) {
	t.Helper()
	a, err := os.ReadFile(want)
	require.NoError(t, err)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, string(a), string(b), "%s differs from %s", got, want)
}

// Reservations lists the addresses host-local holds in dir, its data dir's directory
// of one network (dataDir/<network name>): the files named after an address, not its
// lock, its last-reserved markers or its index.
func Reservations(t testing.TB, dir string) []string {
	t.Helper()
	var addrs []string
	for _, n := range Entries(t, dir) {
		if _, err := netip.ParseAddr(n); err == nil {
			addrs = append(addrs, n)
		}
	}
	return addrs
}

// FileState is what an lstat of a directory entry says: any change to the entry (a
// rewrite, a replacement, a new target) changes it.
type FileState struct {
	Mode  os.FileMode
	Inode uint64
	Mtime int64
	Size  int64
	Link  string
}

// Snapshot records the state of every entry of dirs by its path; a dir that does not
// exist has none. Two snapshots are equal when nothing in the dirs changed.
func Snapshot(t testing.TB, dirs ...string) map[string]FileState {
	t.Helper()
	snap := map[string]FileState{}
	for _, dir := range dirs {
		for _, name := range Entries(t, dir) {
			p := filepath.Join(dir, name)
			fi, err := os.Lstat(p)
			require.NoError(t, err)
			st := fi.Sys().(*syscall.Stat_t)
			s := FileState{Mode: fi.Mode(), Inode: st.Ino, Mtime: fi.ModTime().UnixNano(), Size: fi.Size()}
			if fi.Mode()&os.ModeSymlink != 0 {
				s.Link, err = os.Readlink(p)
				require.NoError(t, err)
			}
			snap[p] = s
		}
	}
	return snap
}

// SourceRules lists the policy rules of n that match a source, as `ip rule` shows them
// ("from 10.1.0.2/32 lookup 100"): the kernel's own rules match none.
func SourceRules(t testing.TB, n *testns.NS) []string {
	t.Helper()
	rules, err := n.Handle(t).RuleList(netlink.FAMILY_ALL)
	require.NoError(t, err)
	var out []string
	for _, r := range rules {
		if r.Src != nil {
			out = append(out, fmt.Sprintf("from %s lookup %d", r.Src, r.Table))
		}
	}
	return out
}

// MasterOf names the master of the link called name inside n, which must exist: "" when
// it has none.
func MasterOf(t testing.TB, n *testns.NS, name string) string {
	t.Helper()
	l := LinkIn(t, n, name)
	require.NotNil(t, l, name)
	if l.Attrs().MasterIndex == 0 {
		return ""
	}
	m, err := n.Handle(t).LinkByIndex(l.Attrs().MasterIndex)
	require.NoError(t, err, "master of %s", name)
	return m.Attrs().Name
}

// TableRoutes lists the routes of n in table through the link called ifName, which must
// exist.
func TableRoutes(t testing.TB, n *testns.NS, table int, ifName string) []netlink.Route {
	t.Helper()
	l := LinkIn(t, n, ifName)
	require.NotNil(t, l, ifName)
	routes, err := n.Handle(t).RouteListFiltered(netlink.FAMILY_ALL,
		&netlink.Route{Table: table, LinkIndex: l.Attrs().Index}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
	require.NoError(t, err, "routes of table %d via %s", table, ifName)
	return routes
}
