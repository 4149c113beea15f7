package hostlocal

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/result/resulttest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

func loadForAdd(req *skel.Request) (*config, error) { return loadConfig(req, true) }

// FuzzLoad drives host-local configs (ranges, the legacy top-level range, ipRanges,
// requested addresses from CNI_ARGS IP=, args.cni.ips and runtimeConfig.ips) through
// skel's ADD path and host-local's loader. A refused config is a config error (never
// 999). An accepted one is also accepted by DEL's loader with the same ranges, its
// range sets are what the allocator may rely on (each pool inside its subnet, start
// before end, one family per set, no two sets overlapping), the allocator's walk from
// any starting point only offers addresses of the set that are not a gateway, the result
// ADD prints reads back as printed, and written back out the config loads to the same
// settings.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct{ config, cniArgs string }{
		{`{"cniVersion":"1.1.0","name":"demo","type":"bridge","ipam":{"type":"host-local","dataDir":"/run/ipam",` +
			`"ranges":[[{"subnet":"10.88.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`, ""},
		{`{"cniVersion":"0.3.1","name":"n","type":"host-local","ipam":{"type":"host-local","subnet":"10.9.0.0/24",` +
			`"rangeStart":"10.9.0.10","rangeEnd":"10.9.0.20","gateway":"10.9.0.254","ranges":[[{"subnet":"10.1.0.0/24"}]]}}`, ""},
		{`{"cniVersion":"1.0.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[` +
			`[{"subnet":"10.1.0.0/30"},{"subnet":"10.2.0.0/30"}],[{"subnet":"fd00::/120","rangeStart":"fd00::10","gateway":"fd00::1"}]],` +
			`"routes":[{"dst":"::/0","gw":"fd00::1","mtu":1400,"table":100}],"resolvConf":"/etc/resolv.conf"}}`, "IP=10.1.0.2"},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}]]},` +
			`"runtimeConfig":{"ips":["10.9.0.5/24","fd00::5"],"ipRanges":[[{"subnet":"10.9.0.0/24","rangeStart":"10.9.0.100"}]]},` +
			`"args":{"cni":{"ips":["10.1.0.7"]}}}`, "IgnoreUnknown=1;IP=10.1.0.9;K8S_POD_NAME=x"},
		{`{"cniVersion":"0.2.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}],[{"subnet":"10.2.0.0/24"}]]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/31"}]]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"::ffff:10.1.0.0/120"}]]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.1/24","rangeEnd":"10.1.0.0"}]]}}`, "IP=x"},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local","ranges":[[{"subnet":"fd00::/64","rangeStart":"fd00::ffff:ffff:ffff:fff0"}],[{"subnet":"10.0.0.0/8"}]]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local","ipam":{"type":"host-local"}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"host-local"}`, ""},
	} {
		f.Add([]byte(seed.config), seed.cniArgs)
	}
	f.Fuzz(func(t *testing.T, config []byte, cniArgs string) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(cniArgs), config, loadForAdd)
		if !ok {
			return
		}
		c := l.Value
		forDel, err := loadConfig(l.Req, false)
		if err != nil {
			t.Fatalf("ADD accepted the config, DEL refuses it: %v", err)
		}
		if !reflect.DeepEqual(forDel.Sets, c.Sets) || !reflect.DeepEqual(forDel.Routes, c.Routes) {
			t.Fatalf("DEL reads other ranges or routes than ADD")
		}
		requireUsableSets(t, c.Sets)
		for _, set := range c.Sets {
			for _, last := range append([]netip.Addr{{}, set[0].Gateway, set[len(set)-1].End}, c.Requested...) {
				requireWalkStaysInSet(t, set, last)
			}
		}
		resulttest.RequireRoundTrips(t, firstResult(c))
		raw, err := skel.LoadConfig[netJSON](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, Plugin(), l, raw, loadForAdd)
	})
}

func requireUsableSets(t *testing.T, sets []rangeSet) {
	t.Helper()
	for i, set := range sets {
		if len(set) == 0 {
			t.Fatalf("range set %d is empty", i)
		}
		for _, r := range set {
			if !r.Subnet.Contains(r.Start) || !r.Subnet.Contains(r.End) || !r.Subnet.Contains(r.Gateway) ||
				r.Start.Compare(r.End) > 0 || r.Start.Is4() != set[0].Start.Is4() || r.size() == 0 {
				t.Fatalf("range set %d has an unusable pool %+v", i, r)
			}
		}
		for j := range i {
			if sets[j].overlaps(set) {
				t.Fatalf("range sets %d and %d overlap", j, i)
			}
		}
	}
}

// firstResult is the result of an ADD that got the first address of every set, as
// allocateFrom builds it.
func firstResult(c *config) *result.Result {
	res := &result.Result{CNIVersion: version.OrDefault(c.Version), Routes: c.Routes}
	for _, set := range c.Sets {
		r := set[0]
		res.IPs = append(res.IPs, result.IPConfig{Address: netip.PrefixFrom(r.Start, r.Subnet.Bits()), Gateway: r.Gateway})
	}
	return res
}

// requireWalkStaysInSet takes the allocator's first candidates after last.
func requireWalkStaysInSet(t *testing.T, set rangeSet, last netip.Addr) {
	t.Helper()
	it := newIterator(set, last)
	for range 64 {
		a, pool, ok := it.next()
		if !ok {
			return
		}
		if !pool.contains(a) || a == pool.Gateway {
			t.Fatalf("walk of %s from %s offered %s from pool %s (gateway %s)", set, last, a, pool, pool.Gateway)
		}
		if p, ok := set.rangeFor(a); !ok || p != pool {
			t.Fatalf("walk of %s from %s offered %s in the wrong pool", set, last, a)
		}
	}
}
