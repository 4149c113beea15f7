package conntrack

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"
)

func TestMatchSelectsByProtocolPortAndReplySource(t *testing.T) {
	flow := &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{Protocol: 17, SrcIP: net.ParseIP("10.77.0.2"), DstIP: net.ParseIP("10.77.0.1"), DstPort: 8081},
		Reverse: netlink.IPTuple{Protocol: 17, SrcIP: net.ParseIP("10.1.1.2"), DstIP: net.ParseIP("10.77.0.2"), SrcPort: 8001},
	}
	cases := []struct {
		name string
		m    Match
		want bool
	}{
		{"port and protocol", Match{Proto: 17, OrigDstPort: 8081}, true},
		{"port, protocol and target", Match{Proto: 17, OrigDstPort: 8081, ReplySrc: netip.MustParseAddr("10.1.1.2")}, true},
		{"other target", Match{Proto: 17, OrigDstPort: 8081, ReplySrc: netip.MustParseAddr("10.1.1.3")}, false},
		{"other port", Match{Proto: 17, OrigDstPort: 8080}, false},
		{"other protocol", Match{Proto: 6, OrigDstPort: 8081}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.m.MatchConntrackFlow(flow))
		})
	}
}

func TestDeleteWithoutMatchesDoesNothing(t *testing.T) {
	n, err := Delete(false, nil)
	assert.NoError(t, err)
	assert.Zero(t, n)
}

func TestDeleteHandsTheFamilyAndEveryMatchToTheTable(t *testing.T) {
	matches := []Match{{Proto: 17, OrigDstPort: 53}, {Proto: 6, OrigDstPort: 80, ReplySrc: netip.MustParseAddr("fd00::5")}}
	for _, v6 := range []bool{false, true} {
		var gotFamily netlink.InetFamily
		var got []netlink.CustomConntrackFilter
		del := func(table netlink.ConntrackTableType, family netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
			assert.Equal(t, netlink.ConntrackTableType(netlink.ConntrackTable), table)
			gotFamily, got = family, filters
			return 2, errors.New("refused")
		}
		n, err := deleteWith(del, v6, matches)
		assert.Equal(t, uint(2), n, "the count stands beside the error")
		assert.EqualError(t, err, "conntrack: delete entries: refused")
		want := netlink.InetFamily(syscall.AF_INET)
		if v6 {
			want = netlink.InetFamily(syscall.AF_INET6)
		}
		assert.Equal(t, want, gotFamily)
		assert.Equal(t, []netlink.CustomConntrackFilter{matches[0], matches[1]}, got)
	}
}
