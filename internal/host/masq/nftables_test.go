package masq

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/foreigntables"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var nftOnly = Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true}

func attachment(cid, addr string) Attachment {
	return Attachment{Network: "net1", ContainerID: cid, IfName: "eth0", IPs: []netip.Prefix{netip.MustParsePrefix(addr)}}
}

// setUp runs Setup of each attachment in host.
func setUp(t *testing.T, host *testns.NS, atts ...Attachment) {
	t.Helper()
	host.Run(t, func() error {
		for _, a := range atts {
			if err := Setup(context.Background(), a, nftOnly); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestNFTablesGCReadsNothingOfAForeignTable: GC finds the network's chains among our
// table's own, never in the inet family's chain dump, which holds every inet table
// (firewalld's, the host's own): beside a foreign inet table of 2,000 chains it sends
// and receives what it does beside one of 10, and removes exactly the stale
// attachment.
func TestNFTablesGCReadsNothingOfAForeignTable(t *testing.T) {
	testns.RequireRoot(t)
	stale, kept := attachment("stale", "10.1.0.11/24"), attachment("kept", "10.1.0.12/24")
	gc := func(host *testns.NS) ([]nftrecord.Request, int) {
		var r nftrecord.Recorder
		defer r.Close()
		host.Run(t, func() error {
			return nftGC("net1", valid(skel.Attachment{ContainerID: "kept", IfName: "eth0"}), r.Option())
		})
		return r.Sent(), r.Received()
	}
	var sent [2][]nftrecord.Request
	var received [2]int
	var big *testns.NS
	for i, foreign := range []int{10, 2000} {
		host := testns.New(t)
		foreigntables.Table(t, host, nftables.TableFamilyINet, "firewalld", foreign)
		setUp(t, host, stale, kept)
		sent[i], received[i] = gc(host)
		big = host
	}
	for _, q := range sent[1] {
		assert.False(t, q.Dump && q.Msg == unix.NFT_MSG_GETCHAIN, "a dump of the family's chains: %v", sent[1])
	}
	assert.Equal(t, sent[0], sent[1])
	assert.Equal(t, received[0], received[1], "beside 10 foreign chains and 2,000")
	rs := nfttest.Ruleset(t, big)
	assert.NotContains(t, rs, nftChainName("net1", "stale", "eth0"))
	assert.NotContains(t, rs, "10.1.0.11")
	assert.Contains(t, rs, nftChainName("net1", "kept", "eth0"))
}

// TestNFTablesGCRemovesTheChainOfAnAttachmentWhoseAddressWasTakenOver: an address
// taken over from a stale attachment (its DEL never came) leaves the stale chain with
// no map element reaching it; GC still finds it among our table's chains. Reading the
// maps' elements instead would leave it for ever.
func TestNFTablesGCRemovesTheChainOfAnAttachmentWhoseAddressWasTakenOver(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	stale, taker := attachment("stale", "10.1.0.11/24"), attachment("taker", "10.1.0.11/24")
	setUp(t, host, stale, taker)
	require.Contains(t, nfttest.Ruleset(t, host), nftChainName("net1", "stale", "eth0"), "premise: the stale chain is left")
	host.Run(t, func() error {
		return GC(context.Background(), "net1", valid(skel.Attachment{ContainerID: "taker", IfName: "eth0"}))
	})
	assert.NotContains(t, nfttest.Ruleset(t, host), nftChainName("net1", "stale", "eth0"))
	host.Run(t, func() error { return Check(context.Background(), taker, nftOnly) })
}

// TestNFTablesTeardownOfAStaleAttachmentLeavesTheAddressItLost: the late DEL of an
// attachment whose address another one took over removes its own chain and leaves the
// other's map element (it deleted every element its comment named, and the other
// container's traffic went out unmasqueraded).
func TestNFTablesTeardownOfAStaleAttachmentLeavesTheAddressItLost(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	stale, taker := attachment("stale", "10.1.0.11/24"), attachment("taker", "10.1.0.11/24")
	setUp(t, host, stale, taker)
	host.Run(t, func() error { return Teardown(context.Background(), "net1", "stale", "eth0") })
	assert.NotContains(t, nfttest.Ruleset(t, host), nftChainName("net1", "stale", "eth0"))
	host.Run(t, func() error { return Check(context.Background(), taker, nftOnly) })
}

// TestNFTablesDropElementsDeletesExactlyThePickedElements: the one map walk of
// teardown and of an address taken over deletes, in both maps, the elements its
// predicate picks and no other.
func TestNFTablesDropElementsDeletesExactlyThePickedElements(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.NewWithLoopback(t)
	a, b := attachment("c1", "10.1.0.5/24"), attachment("c2", "fd01::6/64")
	setUp(t, host, a, b, attachment("c3", "10.1.0.7/24"))
	host.Run(t, func() error {
		c, err := conn()
		if err != nil {
			return err
		}
		defer c.CloseLasting()
		picked := map[string]bool{nftChainName("net1", "c1", "eth0"): true, nftChainName("net1", "c2", "eth0"): true}
		if err := nftDropElements(c, func(e nftables.SetElement) bool { return picked[netfilter.VerdictChain(e.Val)] }); err != nil {
			return err
		}
		return c.Flush()
	})
	out, err := host.Exec(t, "nft", "list", "ruleset")
	require.NoError(t, err, out)
	assert.NotContains(t, out, "10.1.0.5 :")
	assert.NotContains(t, out, "fd01::6 :")
	assert.Contains(t, out, "10.1.0.7 : goto "+nftChainName("net1", "c3", "eth0"))
}
