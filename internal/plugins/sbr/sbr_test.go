package sbr_test

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

const mainTable = 254

func TestAddMovesTheInterfaceRoutesIntoAFreshTable(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	res := w.add(prev, "")
	assert.JSONEq(t, printed(t, prev), printed(t, res), "prevResult is passed on unchanged")

	assert.Equal(t, []string{"from 10.60.0.2/32 lookup 100"}, w.rules())
	assert.ElementsMatch(t, []string{"10.60.0.0/24 src 10.60.0.2", "default via 10.60.0.1"}, w.routes(100, "net1"))
	assert.Empty(t, withoutLinkLocal(w.routes(mainTable, "net1")), "the routes left main")
}

func TestTableChoiceSkipsTablesInUse(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	h := w.cont.Handle(t)
	rule := netlink.NewRule()
	rule.Table, rule.Mark = 100, 7
	require.NoError(t, h.RuleAdd(rule))
	l := pt.LinkIn(t, w.cont, "net1")
	require.NotNil(t, l)
	_, dst, _ := net.ParseCIDR("10.99.0.0/16")
	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Table: 101}))

	w.add(prev, "")
	assert.Contains(t, w.rules(), "from 10.60.0.2/32 lookup 102")
}

func TestDualStackGivesEachAddressItsOwnTable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"}, ipGw{"fd60::2/64", "fd60::1"})
	w.add(prev, "")
	assert.ElementsMatch(t, []string{"from 10.60.0.2/32 lookup 100", "from fd60::2/128 lookup 101"}, w.rules())
	assert.ElementsMatch(t, []string{"10.60.0.0/24 src 10.60.0.2", "default via 10.60.0.1"}, w.routes(100, "net1"))
	v6 := w.routes(101, "net1")
	assert.Contains(t, v6, "fd60::/64")
	assert.Contains(t, v6, "default via fd60::1")
	assert.NotContains(t, v6, "10.60.0.0/24 src 10.60.0.2", "an IPv4 route never lands in the IPv6 address's table")
}

func TestConfiguredGatewayWinsOverPrevResult(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	w.add(prev, `"gateways":["10.60.0.254"]`)
	assert.Contains(t, w.routes(100, "net1"), "default via 10.60.0.254")
}

func TestConfiguredTableGetsOnlyRules(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	w.add(prev, `"table":4000`)
	assert.Equal(t, []string{"from 10.60.0.2/32 lookup 4000"}, w.rules())
	assert.Empty(t, w.routes(4000, "net1"))
	assert.Contains(t, w.routes(mainTable, "net1"), "10.60.0.0/24 src 10.60.0.2", "main keeps its routes")
}

// With table set, gateways and addSourceHints are ignored, as the reference's
// doRoutesWithTable path ignores them: only the rules are added (upstream row P24).
func TestConfiguredTableIgnoresGatewaysAndSourceHints(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	mainBefore := w.routes(mainTable, "net1")
	w.add(prev, `"table":4001,"gateways":["10.60.0.254"],"addSourceHints":true`)
	assert.Equal(t, []string{"from 10.60.0.2/32 lookup 4001"}, w.rules())
	assert.Empty(t, w.routes(4001, "net1"))
	assert.ElementsMatch(t, mainBefore, w.routes(mainTable, "net1"), "main is untouched")
}

func TestAddSourceHintsKeepsSubnetRoutesInMainWithSource(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	w.add(prev, `"addSourceHints":true`)
	assert.Equal(t, []string{"10.60.0.0/24 src 10.60.0.2"}, withoutLinkLocal(w.routes(mainTable, "net1")))
	assert.Contains(t, w.routes(100, "net1"), "default via 10.60.0.1")
}

// Eight interfaces of one container are routed at once, as a runtime attaching several
// networks in parallel would: the namespace lock must give each its own table.
func TestConcurrentAddsPickDistinctTables(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		ifName := fmt.Sprintf("net%d", i)
		prev := w.iface(ifName, ipGw{fmt.Sprintf("10.70.%d.2/24", i), fmt.Sprintf("10.70.%d.1", i)})
		c := conf(t, prev, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.invoke("ADD", w.cont.Path, ifName, c)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	rules, err := w.cont.Handle(t).RuleList(netlink.FAMILY_V4)
	require.NoError(t, err)
	tables := map[int]string{}
	for _, r := range rules {
		if r.Src == nil {
			continue
		}
		assert.NotContains(t, tables, r.Table, "table %d given to %s and %s", r.Table, tables[r.Table], r.Src)
		tables[r.Table] = r.Src.String()
	}
	assert.Len(t, tables, n)
	for table, src := range tables {
		assert.GreaterOrEqual(t, table, 100)
		var i int
		_, err := fmt.Sscanf(src, "10.70.%d.2/32", &i)
		require.NoError(t, err)
		assert.Contains(t, w.routes(table, fmt.Sprintf("net%d", i)), fmt.Sprintf("default via 10.70.%d.1", i))
	}
}

func TestDelLeavesNoRuleAndIsIdempotent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"}, ipGw{"fd60::2/64", "fd60::1"})
	before := w.rules()
	w.add(prev, "")
	require.Len(t, w.rules(), len(before)+2)

	for range 2 {
		_, err := w.invoke("DEL", w.cont.Path, "net1", conf(t, prev, ""))
		require.NoError(t, err)
	}
	assert.Equal(t, before, w.rules())
	assert.Empty(t, w.routes(100, "net1"), "the chosen tables are emptied")
	assert.Empty(t, w.routes(101, "net1"))
	_, err := w.invoke("CHECK", w.cont.Path, "net1", conf(t, prev, ""))
	assert.Error(t, err, "CHECK after DEL")
}

// The reference finds its rules through the interface's addresses and fails when the
// interface is already gone; prevResult names them as well.
func TestDelAfterTheInterfaceVanishedStillRemovesTheRules(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	w.add(prev, "")
	h := w.cont.Handle(t)
	l := pt.LinkIn(t, w.cont, "net1")
	require.NotNil(t, l)
	require.NoError(t, h.LinkDel(l))

	_, err := w.invoke("DEL", w.cont.Path, "net1", conf(t, prev, ""))
	require.NoError(t, err)
	assert.Empty(t, w.rules())
	_, err = w.invoke("DEL", w.cont.Path, "net1", conf(t, prev, ""))
	assert.NoError(t, err, "DEL again")
}

func TestDelRemovesOnlyItsOwnRules(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	h := w.cont.Handle(t)
	foreign := netlink.NewRule()
	foreign.Src, foreign.Table = &net.IPNet{IP: net.ParseIP("10.61.0.9").To4(), Mask: net.CIDRMask(32, 32)}, 100
	require.NoError(t, h.RuleAdd(foreign))
	toMain := netlink.NewRule()
	toMain.Src, toMain.Table = &net.IPNet{IP: net.ParseIP("10.60.0.2").To4(), Mask: net.CIDRMask(32, 32)}, mainTable
	require.NoError(t, h.RuleAdd(toMain))

	w.add(prev, `"table":300`)
	_, err := w.invoke("DEL", w.cont.Path, "net1", conf(t, prev, `"table":300`))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"from 10.61.0.9/32 lookup 100", "from 10.60.0.2/32 lookup 254"}, w.rules())
}

func TestDelWithoutNamespaceSucceeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	gone := testns.New(t)
	path := gone.Path
	gone.Close()
	_, err := w.invoke("DEL", path, "net1", conf(t, nil, ""))
	assert.NoError(t, err)
	_, err = w.invoke("DEL", "", "net1", conf(t, nil, ""))
	assert.NoError(t, err)
}

// The reference's CHECK does nothing; this one notices a missing rule or route.
func TestCheckNoticesAMissingRuleOrRoute(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	c := conf(t, prev, "")
	_, err := w.invoke("ADD", w.cont.Path, "net1", c)
	require.NoError(t, err)
	_, err = w.invoke("CHECK", w.cont.Path, "net1", c)
	require.NoError(t, err)

	h := w.cont.Handle(t)
	l := pt.LinkIn(t, w.cont, "net1")
	require.NotNil(t, l)
	def := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		Gw: net.ParseIP("10.60.0.1").To4(), Table: 100}
	require.NoError(t, h.RouteDel(def))
	_, err = w.invoke("CHECK", w.cont.Path, "net1", c)
	assert.ErrorContains(t, err, "no default route via 10.60.0.1")
	require.NoError(t, h.RouteAdd(def))
	_, err = w.invoke("CHECK", w.cont.Path, "net1", c)
	require.NoError(t, err)

	rule := netlink.NewRule()
	rule.Src, rule.Table = &net.IPNet{IP: net.ParseIP("10.60.0.2").To4(), Mask: net.CIDRMask(32, 32)}, 100
	require.NoError(t, h.RuleDel(rule))
	_, err = w.invoke("CHECK", w.cont.Path, "net1", c)
	assert.ErrorContains(t, err, "no rule from 10.60.0.2")
}

func TestFailedAddLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"}, ipGw{"fd60::2/64", "fd60::1"})
	mainBefore := w.routes(mainTable, "net1")
	// An IPv6 gateway that is not on the link: the second table's default route fails
	// after the first table is complete.
	_, err := w.invoke("ADD", w.cont.Path, "net1", conf(t, prev, `"gateways":["fd99::1"]`))
	require.Error(t, err)
	assert.ErrorContains(t, err, "fd99::1", "the error names the gateway")
	assert.Empty(t, w.rules())
	assert.Empty(t, w.routes(100, "net1"))
	assert.Empty(t, w.routes(101, "net1"), "nor the second table's routes")
	assert.ElementsMatch(t, mainBefore, w.routes(mainTable, "net1"))
}

func TestBadInputIsAnInvalidConfig(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := prevResult("net1", w.cont.Path, ipGw{"10.60.0.2/24", "10.60.0.1"})
	for name, tc := range map[string]struct {
		conf  []byte
		field string // what the error must name
	}{
		"no prevResult":    {conf(t, nil, ""), "prevResult"},
		"reserved table":   {conf(t, prev, `"table":254`), "table"},
		"negative table":   {conf(t, prev, `"table":-1`), "table"},
		"table not number": {conf(t, prev, `"table":"x"`), "table"},
		"bad gateway":      {conf(t, prev, `"gateways":["nope"]`), "gateways"},
		"two v4 gateways":  {conf(t, prev, `"gateways":["10.0.0.1","10.0.0.2"]`), "gateways"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.invoke("ADD", w.cont.Path, "net1", tc.conf)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
			assert.ErrorContains(t, err, tc.field)
			assert.Empty(t, w.rules(), "no rule left")
		})
	}
}

// A prevResult that gives the interface no address (they are on another interface, or
// there are none) makes sbr route the addresses the kernel has on it; with none there
// either and none in prevResult at all, the ADD is refused (the reference refuses too),
// and nothing is left.
func TestAddRoutesTheKernelsAddressesWhenPrevResultNamesNone(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.iface("net1", ipGw{"10.60.0.2/24", ""})
	w.iface("net2")
	elsewhere := prevResult("other", w.cont.Path, ipGw{"10.61.0.2/24", ""})
	_, err := w.invoke("ADD", w.cont.Path, "net1", conf(t, elsewhere, ""))
	require.NoError(t, err)
	assert.Equal(t, []string{"from 10.60.0.2/32 lookup 100"}, w.rules())
	_, err = w.invoke("CHECK", w.cont.Path, "net1", conf(t, elsewhere, ""))
	assert.NoError(t, err)
	_, err = w.invoke("DEL", w.cont.Path, "net1", conf(t, elsewhere, ""))
	require.NoError(t, err)
	assert.Empty(t, w.rules())

	_, err = w.invoke("ADD", w.cont.Path, "net2", conf(t, prevResult("net2", w.cont.Path), ""))
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, `prevResult: no addresses at all, and interface "net2" has none`)
	assert.Empty(t, w.rules())
}

// A prevResult whose addresses are all on other interfaces, for an interface the kernel
// shows no address on either, is accepted by the reference (v1.9.1): so ours accepts it
// too, routes nothing, prints prevResult unchanged and says why on stderr; CHECK finds
// nothing to check and DEL nothing to delete, twice, leaving the other interface's rule.
// Unlike the reference (TestReferenceEmptiesMainOfAnInterfaceWithoutAddresses), the
// interface's routes stay in main.
func TestAddOfAnInterfaceWithoutAddressesPassesPrevResultThrough(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", ipGw{"10.60.0.2/24", ""})
	w.add(prev, "")
	w.iface("net2")
	testns.Route(t, w.cont, "net2", "10.77.0.0/16", "")
	prev.AddInterface(result.Interface{Name: "net2", Sandbox: w.cont.Path})
	rulesBefore, mainBefore := w.rules(), w.mainRoutes("net2")
	require.Equal(t, []string{"from 10.60.0.2/32 lookup 100"}, rulesBefore, "premise: net1 is routed")

	for _, cmd := range []string{"ADD", "CHECK", "DEL", "DEL"} {
		var stderr strings.Builder
		res, err := w.invokeTo(&stderr, cmd, w.cont.Path, "net2", conf(t, prev, ""))
		require.NoError(t, err, cmd)
		if cmd == "ADD" {
			assert.Equal(t, printed(t, prev), printed(t, res), "prevResult passes through")
			assert.Contains(t, stderr.String(), `sbr: interface "net2" has no address, in prevResult or the kernel: nothing to route`)
		}
		assert.Equal(t, rulesBefore, w.rules(), "after %s", cmd)
		assert.Equal(t, mainBefore, w.mainRoutes("net2"), "after %s", cmd)
	}
}

// sbr copies into its table only the routes that serve the prevResult's addresses, so
// it takes only those out of main: an IPv4-only prevResult leaves the interface's IPv6
// link-local route where it was, instead of deleting it from every table.
func TestAddLeavesInMainTheRoutesItDidNotCopy(t *testing.T) {
	t.Parallel()
	w, prev := newNet1(t)
	h := w.cont.Handle(t)
	l := pt.LinkIn(t, w.cont, "net1")
	require.NotNil(t, l)
	_, other, _ := net.ParseCIDR("fd61::/64")
	require.NoError(t, h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: other}))
	before := w.routes(mainTable, "net1")

	w.add(prev, "")
	assert.ElementsMatch(t, []string{"10.60.0.0/24 src 10.60.0.2", "default via 10.60.0.1"}, w.routes(100, "net1"))
	var v6 []string
	for _, r := range before {
		if strings.Contains(r, ":") {
			v6 = append(v6, r) // fd61::/64, and fe80::/64 when the kernel made it
		}
	}
	assert.ElementsMatch(t, v6, w.routes(mainTable, "net1"), "only the copied IPv4 routes left main")
	assert.Contains(t, v6, "fd61::/64")
}

// TestDelReadsOnlyTheTable: DEL needs the table alone to find its rules. Keys it does
// not need never make it fail (a config ADD refuses for them still deletes the
// attachment), and a table ADD refuses holds no rule of this plugin's: DEL succeeds and
// deletes nothing (it used to fail for ever, or take table 254 for "none set").
func TestDelReadsOnlyTheTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, table, extra string
		deletes            bool
	}{
		{"gateways not a list", "", `"gateways":"x"`, true},
		{"gateways not addresses", "", `"gateways":["nope"]`, true},
		{"addSourceHints not a bool", "", `"addSourceHints":"yes"`, true},
		{"configured table, gateways of one family twice", `"table":300`, `"gateways":["10.0.0.1","10.0.0.2"]`, true},
		{"table not a number", "", `"table":"x"`, false},
		{"table reserved", "", `"table":254`, false},
		{"table out of range", "", `"table":4294967296`, false},
		{"table negative", "", `"table":-1`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, prev := newNet1(t)
			good := conf(t, prev, tc.table)
			bad := conf(t, prev, strings.TrimPrefix(tc.table+","+tc.extra, ","))
			_, err := w.invoke("ADD", w.cont.Path, "net1", bad)
			require.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "premise: ADD refuses it: %v", err)
			_, err = w.invoke("ADD", w.cont.Path, "net1", good)
			require.NoError(t, err)
			added := w.rules()
			require.Len(t, added, 1)

			for i := range 2 {
				_, err = w.invoke("DEL", w.cont.Path, "net1", bad)
				require.NoError(t, err, "DEL %d", i+1)
			}
			if tc.deletes {
				assert.Empty(t, w.rules(), "the attachment is deleted")
			} else {
				assert.Equal(t, added, w.rules(), "nothing is deleted")
			}
		})
	}
}

// TestDelPutsBackTheMainRoutesItMoved: ADD moves the interface's routes out of the main
// table into each address's table; when the interface outlives the DEL (a device that
// goes back to the host, a chain whose main plugin keeps it), DEL puts them back as they
// were, and takes away what ADD added there itself (the addSourceHints routes, a default
// route main never had).
func TestDelPutsBackTheMainRoutesItMoved(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		mainDefault bool
	}{
		{"subnet and default route", "", true},
		{"subnet route only", "", false},
		{"with addSourceHints", `"addSourceHints":true`, true},
		{"with a configured gateway", `"gateways":["10.60.0.254"]`, false},
		{"dual stack", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			ips := []ipGw{{"10.60.0.2/24", "10.60.0.1"}}
			if tc.name == "dual stack" {
				ips = append(ips, ipGw{"fd60::2/64", "fd60::1"})
			}
			prev := w.iface("net1", ips...)
			if tc.mainDefault {
				// As a main plugin does from its IPAM's routes.
				testns.DefaultRoutes(t, w.cont, "net1", "10.60.0.1")
				prev.Routes = append(prev.Routes, result.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.60.0.1")})
			}
			before := w.mainRoutes("net1")
			c := conf(t, prev, tc.extra)
			_, err := w.invoke("ADD", w.cont.Path, "net1", c)
			require.NoError(t, err)
			require.NotEqual(t, before, w.mainRoutes("net1"), "premise: ADD moved routes out of main")

			for i := range 2 {
				_, err = w.invoke("DEL", w.cont.Path, "net1", c)
				require.NoError(t, err, "DEL %d", i+1)
			}
			assert.ElementsMatch(t, before, w.mainRoutes("net1"))
			assert.Empty(t, w.rules())
			assert.Empty(t, w.routes(100, "net1"))
			assert.Empty(t, w.routes(101, "net1"))
		})
	}
}
