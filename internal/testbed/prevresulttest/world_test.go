package prevresulttest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The world every run gets, fresh: a host namespace with a bridge and one veth port of
// it, whose other end is the container's eth0, with two IPv4 addresses and one IPv6
// one (the kernel's view, whatever the prevResult under test says).
const (
	bridge   = "br0"
	hostVeth = "veth0"
	ifName   = "eth0"
	// mac is what tuning sets on the container interface.
	mac = "c2:00:00:00:99:01"
)

var (
	bridgeAddrs = []string{"10.99.0.1/24", "fd00:99::1/64"}
	ctrAddrs    = []string{"10.99.0.2/24", "10.99.0.3/24", "fd00:99::2/64"}
)

type world struct {
	host, ctr *testns.NS
	// state is the directory for plugins' state files (tuning's backups): never the
	// machine's /run/cni.
	state string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := newBareWorld(t)
	testns.Up(t, w.ctr, ifName, ctrAddrs...)
	testns.DefaultRoutes(t, w.ctr, ifName, "10.99.0.1", "fd00:99::1")
	return w
}

// newBareWorld is the world with no address on the container's interface, and so no
// route but the kernel's link-local one: as a main plugin that leaves addressing to
// someone else hands it on.
func newBareWorld(t *testing.T) *world {
	t.Helper()
	w := &world{host: testns.NewWithLoopback(t), ctr: testns.NewWithLoopback(t), state: t.TempDir()}
	testns.Veth(t, w.host, hostVeth, nil, w.ctr, ifName, nil)
	h := w.host.Handle(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}
	require.NoError(t, h.LinkAdd(br))
	veth, err := h.LinkByName(hostVeth)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMaster(veth, br))
	testns.Up(t, w.host, bridge, bridgeAddrs...)
	return w
}

// run is what one exec of a plugin gave: its stdout and, when it failed, the CNI
// error code and message it printed.
type run struct {
	out  []byte
	code uint
	msg  string
}

// exec runs bin as a runtime does (attachmenttest's exec), inside the host namespace,
// for the world's container as eth0, with the test's PATH (for iptables and tc).
func (w *world) exec(t *testing.T, bin, command string, conf []byte) run {
	t.Helper()
	e := &attachmenttest.Env{T: t, Plugin: &skel.Plugin{Name: filepath.Base(bin)}, Host: w.host}
	out, cerr := e.Exec(filepath.Dir(bin), command, "ctr-prev", w.ctr.Path, conf, "PATH="+os.Getenv("PATH"))
	r := run{out: []byte(out)}
	if cerr != nil {
		r.code, r.msg = cerr.Code, cerr.Msg
	}
	return r
}

// hostOut runs a listing tool in the host namespace.
func (w *world) hostOut(t *testing.T, name string, arg ...string) string {
	t.Helper()
	out, err := w.host.Exec(t, name, arg...)
	require.NoError(t, err, "%s %v: %s", name, arg, out)
	return out
}

// matches returns the first submatch of re in every line of text, sorted and without
// repeats.
func matches(re *regexp.Regexp, text string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var dnatTo = regexp.MustCompile(`(?m)-j DNAT --to-destination (\S+)`)

// dnatTargets are the destinations of the host's DNAT rules, both families.
func (w *world) dnatTargets(t *testing.T) string {
	t.Helper()
	rules := w.hostOut(t, "iptables-save", "-t", "nat") + w.hostOut(t, "ip6tables-save", "-t", "nat")
	return strings.Join(matches(dnatTo, rules), " ")
}

var (
	forwardAddr = regexp.MustCompile(`(?m)^-A CNI-FORWARD -[ds] (\S+)/(?:32|128) `)
	isolated    = regexp.MustCompile(`(?m)^-A CNI-ISOLATION-STAGE-1 -i (\S+) `)
)

// firewalled are the addresses the host's CNI-FORWARD chain accepts and the interfaces
// the isolation chain polices.
func (w *world) firewalled(t *testing.T) string {
	t.Helper()
	rules := w.hostOut(t, "iptables-save", "-t", "filter") + w.hostOut(t, "ip6tables-save", "-t", "filter")
	s := strings.Join(matches(forwardAddr, rules), " ")
	if ifs := matches(isolated, rules); len(ifs) > 0 {
		s += "; isolates " + strings.Join(ifs, " ")
	}
	return s
}

var qdiscKind = regexp.MustCompile(`(?m)^qdisc (\S+) `)

// shaped names the qdiscs on the host veth and counts the host's ifbs.
func (w *world) shaped(t *testing.T) string {
	t.Helper()
	kinds := matches(qdiscKind, w.hostOut(t, "tc", "qdisc", "show", "dev", hostVeth))
	kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "noqueue" })
	links, err := w.host.Handle(t).LinkList()
	require.NoError(t, err)
	ifbs := 0
	for _, l := range links {
		if l.Type() == "ifb" {
			ifbs++
		}
	}
	return fmt.Sprintf("%s %s, %d ifb", hostVeth, strings.Join(kinds, "+"), ifbs)
}

var fromRule = regexp.MustCompile(`(?m)^\d+:\s+from (\S+) lookup (\S+)`)

// sourceRouted lists the container's rules that route a source address by a table,
// as address>table, sorted.
func (w *world) sourceRouted(t *testing.T) string {
	t.Helper()
	var out []string
	for _, fam := range []string{"-4", "-6"} {
		text, err := w.ctr.Exec(t, "ip", fam, "rule", "show")
		require.NoError(t, err, text)
		for _, m := range fromRule.FindAllStringSubmatch(text, -1) {
			if m[1] != "all" {
				out = append(out, m[1]+">"+m[2])
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// tuned says whether the container interface has the MAC tuning sets, and which
// interfaces of the printed result carry it.
func (w *world) tuned(t *testing.T, out []byte) string {
	t.Helper()
	l, err := w.ctr.Handle(t).LinkByName(ifName)
	require.NoError(t, err)
	var res struct {
		Interfaces []struct {
			Name string `json:"name"`
			Mac  string `json:"mac"`
		} `json:"interfaces"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	var in []string
	for i, iface := range res.Interfaces {
		if iface.Mac == mac {
			in = append(in, fmt.Sprint(i))
		}
	}
	return fmt.Sprintf("%s %s; result interfaces [%s]", ifName, l.Attrs().HardwareAddr, strings.Join(in, " "))
}

// vrfMember names the master of the container interface.
func (w *world) vrfMember(t *testing.T) string {
	t.Helper()
	if m := pt.MasterOf(t, w.ctr, ifName); m != "" {
		return "master " + m
	}
	return "no master"
}
