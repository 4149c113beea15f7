package daemon

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

func TestReachabilityIsTheLastExchangePerNetworkAndFamily(t *testing.T) {
	var r reachability
	noAnswer := errors.New("no answer")
	r.note("a", leasefile.DHCPv6, noAnswer, false)
	r.note("a", leasefile.DHCPv4, nil, false)
	_, down := r.unanswered("a", leasefile.DHCPv6)
	assert.True(t, down)
	_, down = r.unanswered("a", leasefile.DHCPv4)
	assert.False(t, down)
	_, down = r.unanswered("b", leasefile.DHCPv6)
	assert.False(t, down, "a network not talked on yet is available")

	r.note("a", leasefile.DHCPv6, linkid.ErrGone, false)
	_, down = r.unanswered("a", leasefile.DHCPv6)
	assert.True(t, down, "an attachment that is gone says nothing of the server")
	r.note("a", leasefile.DHCPv6, noAnswer, true)
	_, down = r.unanswered("a", leasefile.DHCPv6)
	assert.False(t, down, "a refusal is an answer")

	r.note("a", leasefile.DHCPv6, noAnswer, false)
	r.mu.Lock()
	c := r.last[reachKey{"a", leasefile.DHCPv6}]
	c.at = time.Now().Add(-unansweredFor)
	r.last[reachKey{"a", leasefile.DHCPv6}] = c
	r.mu.Unlock()
	_, down = r.unanswered("a", leasefile.DHCPv6)
	assert.False(t, down, "an old failure with nothing retrying since ages out")
}
