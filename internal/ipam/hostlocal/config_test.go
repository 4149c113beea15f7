package hostlocal

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

type obj = map[string]any

func set(pools ...obj) []obj { return pools }

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name    string
		version string
		ipam    obj
		extra   obj
		wantErr string // empty: valid
	}{
		{name: "single range", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}}},
		{name: "legacy top-level subnet", ipam: obj{"subnet": "10.1.0.0/24", "gateway": "10.1.0.254"}},
		{name: "no ranges", ipam: obj{}, wantErr: "ipam.ranges: no IP ranges specified"},
		{name: "empty range set", ipam: obj{"ranges": []any{set()}}, wantErr: "ipam.ranges[0]: empty range set"},
		{name: "missing subnet", ipam: obj{"ranges": []any{set(obj{"rangeStart": "10.1.0.5"})}},
			wantErr: "ipam.ranges[0][0].subnet: missing"},
		{name: "bad subnet", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0"})}},
			wantErr: `ipam.ranges[0][0].subnet: invalid CIDR "10.1.0.0"`},
		{name: "v4 too small", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/31"})}},
			wantErr: "subnet: network 10.1.0.0/31 too small to allocate from"},
		{name: "v6 too small", ipam: obj{"ranges": []any{set(obj{"subnet": "fd00::/127"})}},
			wantErr: "too small to allocate from"},
		{name: "host bits set", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.7/24"})}},
			wantErr: "ipam.ranges[0][0].subnet: network has host bits set: for a subnet mask of length 24 the network address is 10.1.0.0"},
		{name: "legacy host bits set", ipam: obj{"subnet": "10.1.0.7/24"}, wantErr: "ipam.subnet: network has host bits set"},
		{name: "rangeStart outside subnet", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "rangeStart": "10.2.0.5"})}},
			wantErr: "ipam.ranges[0][0].rangeStart: 10.2.0.5 not in network 10.1.0.0/24"},
		{name: "rangeEnd outside subnet", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "rangeEnd": "10.2.0.5"})}},
			wantErr: "ipam.ranges[0][0].rangeEnd: 10.2.0.5 not in network"},
		{name: "gateway outside subnet", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "gateway": "10.2.0.1"})}},
			wantErr: "ipam.ranges[0][0].gateway: 10.2.0.1 not in network"},
		{name: "bad gateway", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "gateway": "x"})}},
			wantErr: `ipam.ranges[0][0].gateway: invalid IP address "x"`},
		{name: "start after end", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.9", "rangeEnd": "10.1.0.3"})}},
			wantErr: "rangeStart: 10.1.0.9 is after rangeEnd 10.1.0.3"},
		{name: "family mix in a set", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}, obj{"subnet": "fd00::/64"})}},
			wantErr: "ipam.ranges[0][1]: mixed address families in one range set"},
		{name: "overlap inside a set", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}, obj{"subnet": "10.1.0.0/25"})}},
			wantErr: "ipam.ranges[0][1]: subnets 10.1.0.0/24 and 10.1.0.0/25 overlap"},
		{name: "disjoint pools of one subnet", ipam: obj{"ranges": []any{set(
			obj{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.10", "rangeEnd": "10.1.0.19"},
			obj{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.20", "rangeEnd": "10.1.0.29"})}}},
		{name: "overlap between sets", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "10.1.0.0/16"})}},
			wantErr: "ipam.ranges[1]: range set 0 overlaps with 1"},
		{name: "ipRanges overlapping ranges", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}},
			extra:   obj{"runtimeConfig": obj{"ipRanges": []any{set(obj{"subnet": "10.1.0.0/24"})}}},
			wantErr: "ipam.ranges[0]: range set 0 overlaps with 1 (runtimeConfig.ipRanges[0])"},
		{name: "dual stack", ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/64"})}}},
		{name: "0.2.0 one v4 and one v6 set", version: "0.2.0",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/64"})}}},
		{name: "0.2.0 two v4 sets", version: "0.2.0",
			ipam:    obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "10.2.0.0/24"})}},
			wantErr: "ipam.ranges: CNI version 0.2.0 does not support more than 1 address per family"},
		{name: "0.3.0 two v4 sets", version: "0.3.0",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "10.2.0.0/24"})}}},
		{name: "bad route", ipam: obj{"subnet": "10.1.0.0/24", "routes": []any{obj{"dst": "nope"}}},
			wantErr: `ipam.routes[0].dst: invalid CIDR "nope"`},
		{name: "bad route gw", ipam: obj{"subnet": "10.1.0.0/24", "routes": []any{obj{"dst": "0.0.0.0/0", "gw": "1.2.3"}}},
			wantErr: `ipam.routes[0].gw: invalid IP address "1.2.3"`},
		{name: "bad requested ip", ipam: obj{"subnet": "10.1.0.0/24"}, extra: obj{"runtimeConfig": obj{"ips": []string{"nope"}}},
			wantErr: `runtimeConfig.ips[0]: invalid IP address "nope"`},
		{name: "missing resolvConf", ipam: obj{"subnet": "10.1.0.0/24", "resolvConf": "/nonexistent/resolv.conf"},
			wantErr: "ipam.resolvConf:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, tc.ipam)
			if tc.version != "" {
				n.version = tc.version
			}
			n.extra = tc.extra
			res, _, err := n.invoke(skel.CmdAdd, "c1", "eth0", "")
			if tc.wantErr == "" {
				require.NoError(t, err)
				// An accepted config takes one address per range set, each reserved for c1.
				sets, _ := n.ipam["ranges"].([]any)
				assert.Len(t, res.IPs, len(sets)+btoi(n.ipam["subnet"] != nil))
				assert.Len(t, n.reservations(), len(res.IPs))
				for ip, owner := range n.reservations() {
					assert.Equal(t, "c1\r\neth0", owner, ip)
				}
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.Empty(t, n.reservations(), "a rejected config reserves nothing")
			assert.NoDirExists(t, n.dir(), "a rejected config is refused before the network dir is made")
		})
	}
}

func TestConfigWithoutIPAMKeyIsInvalid(t *testing.T) {
	n := newNetwork(t, obj{})
	n.ipam = nil
	_, _, err := n.invoke(skel.CmdAdd, "c1", "eth0", "")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Contains(t, err.Error(), "'ipam' key", "the error names the missing key")
	assert.NoDirExists(t, n.dir())
}

func TestRangeDefaults(t *testing.T) {
	cases := []struct {
		subnet, start, end, gw string
	}{
		{"10.1.0.0/24", "10.1.0.1", "10.1.0.254", "10.1.0.1"},
		{"10.1.0.0/30", "10.1.0.1", "10.1.0.2", "10.1.0.1"},
		{"10.0.0.0/8", "10.0.0.1", "10.255.255.254", "10.0.0.1"},
		{"fd00::/64", "fd00::1", "fd00::ffff:ffff:ffff:ffff", "fd00::1"},
		{"fd00:1::/120", "fd00:1::1", "fd00:1::ff", "fd00:1::1"},
	}
	for _, tc := range cases {
		t.Run(tc.subnet, func(t *testing.T) {
			r, err := parseRange("r", rangeJSON{Subnet: tc.subnet})
			require.NoError(t, err)
			assert.Equal(t, tc.start, r.Start.String())
			assert.Equal(t, tc.end, r.End.String())
			assert.Equal(t, tc.gw, r.Gateway.String())
		})
	}
}

func TestRangeSize(t *testing.T) {
	cases := []struct {
		start, end string
		want       uint64
	}{
		{"10.1.0.1", "10.1.0.254", 254},
		{"10.1.0.7", "10.1.0.7", 1},
		{"0.0.0.0", "255.255.255.255", 1 << 32},
		{"fd00::1", "fd00::ff", 255},
		{"fd00::", "fd00::ffff:ffff:ffff:ffff", ^uint64(0)},
		{"fd00::", "fd00:0:0:1::5", ^uint64(0)},
		{"fd00::ffff:ffff:ffff:fffe", "fd00:0:0:1::1", 4},
	}
	for _, tc := range cases {
		r := ipRange{Start: netip.MustParseAddr(tc.start), End: netip.MustParseAddr(tc.end)}
		assert.Equal(t, tc.want, r.size(), "%s-%s", tc.start, tc.end)
	}
}

func TestIteratorStartsAfterTheLastReservedAddress(t *testing.T) {
	set := rangeSet{
		{Subnet: netip.MustParsePrefix("10.1.0.0/24"), Start: netip.MustParseAddr("10.1.0.10"),
			End: netip.MustParseAddr("10.1.0.12"), Gateway: netip.MustParseAddr("10.1.0.1")},
		{Subnet: netip.MustParsePrefix("10.2.0.0/24"), Start: netip.MustParseAddr("10.2.0.1"),
			End: netip.MustParseAddr("10.2.0.2"), Gateway: netip.MustParseAddr("10.2.0.1")},
	}
	walk := func(last string) []string {
		var l netip.Addr
		if last != "" {
			l = netip.MustParseAddr(last)
		}
		it := newIterator(set, l)
		var out []string
		for a, _, ok := it.next(); ok; a, _, ok = it.next() {
			out = append(out, a.String())
		}
		return out
	}
	assert.Equal(t, []string{"10.1.0.10", "10.1.0.11", "10.1.0.12", "10.2.0.2"}, walk(""))
	assert.Equal(t, []string{"10.1.0.12", "10.2.0.2", "10.1.0.10", "10.1.0.11"}, walk("10.1.0.11"))
	assert.Equal(t, []string{"10.1.0.10", "10.1.0.11", "10.1.0.12", "10.2.0.2"}, walk("10.2.0.2"))
	assert.Equal(t, []string{"10.1.0.10", "10.1.0.11", "10.1.0.12", "10.2.0.2"}, walk("10.9.9.9"), "outside the set: start over")
}

func TestLastAddrIsTheReferencesDefaultRangeEnd(t *testing.T) {
	for prefix, want := range map[string]string{
		"10.1.0.0/24":  "10.1.0.254", // IPv4 stops before broadcast
		"10.2.0.0/22":  "10.2.3.254", // host bits start inside a byte
		"10.3.0.4/30":  "10.3.0.6",
		"10.0.0.0/8":   "10.255.255.254",
		"fd00::/120":   "fd00::ff", // IPv6 has no broadcast
		"fd00::80/121": "fd00::ff",
		"fd00::/64":    "fd00::ffff:ffff:ffff:ffff",
	} {
		assert.Equal(t, want, lastAddr(netip.MustParsePrefix(prefix)).String(), prefix)
	}
}
