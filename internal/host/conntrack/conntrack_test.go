package conntrack

import (
	"net"
	"net/netip"
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
