package plugintest_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugintest"
	"github.com/cnikit/cni/internal/testns"
)

// TestLinkListSurvivesLinksComingAndGoing lists a namespace of many links while another
// goroutine adds and deletes a veth pair in it, as the kernel's late removal of gone
// containers' veths does: many of those dumps come back interrupted, and the listing
// retries them instead of failing the test (it failed within a few tries).
func TestLinkListSurvivesLinksComingAndGoing(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	h := n.Handle(t)
	const pairs = 150 // enough links for a dump of several messages, which a change can interrupt
	for i := range pairs {
		require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("a%d", i)}, PeerName: fmt.Sprintf("b%d", i)}))
	}
	stop := make(chan struct{})
	var churn sync.WaitGroup
	churn.Go(func() {
		ch := n.Handle(t)
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "churn0"}, PeerName: "churn1"}
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = ch.LinkAdd(v)
			_ = ch.LinkDel(v)
		}
	})
	defer churn.Wait()
	defer close(stop)
	for range 50 {
		assert.NotEmpty(t, plugintest.LinkList(t, n)) // an interrupted dump it could not retry fails the test
	}
}
