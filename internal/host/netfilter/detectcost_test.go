package netfilter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/foreigntables"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// detectRecorded runs Detect in n through a recorder and returns its answer, what it
// sent and how many messages came back.
func detectRecorded(t *testing.T, n *testns.NS) (netfilter.Backend, []nftrecord.Request, int) {
	t.Helper()
	var r nftrecord.Recorder
	defer r.Close()
	var b netfilter.Backend
	n.Run(t, func() error { b = netfilter.DetectWith(r.Option()); return nil })
	return b, r.Sent(), r.Received()
}

// noChainDump fails for a dump of chains (every chain of a family, or of all) in sent.
// A rule dump is one chain's: google/nftables names the chain in every one.
func noChainDump(t *testing.T, sent []nftrecord.Request) {
	t.Helper()
	for _, q := range sent {
		assert.False(t, q.Dump && q.Msg == unix.NFT_MSG_GETCHAIN, "a dump of chains: %v", sent)
	}
}

// TestDetectOnAnEmptyNodeIsOneTableDump: where nf_tables holds nothing, detection is
// the dump of the tables' headers, answered by nothing.
func TestDetectOnAnEmptyNodeIsOneTableDump(t *testing.T) {
	testns.RequireRoot(t)
	testns.FakeIPTablesTools(t)
	b, sent, received := detectRecorded(t, testns.New(t))
	assert.Equal(t, netfilter.NFTables, b)
	assert.Equal(t, []nftrecord.Request{{Msg: unix.NFT_MSG_GETTABLE, Dump: true}}, sent)
	assert.Zero(t, received)
}

// TestDetectCostsTheSameBesideKubeProxysTables: on a node where kube-proxy keeps
// thousands of chains, in its own table (nftables mode) or in iptables-nft's (iptables
// mode), detection reads no chain dump, and sends and receives as much beside 1,000
// Services as beside 10. It used to dump every chain of every table (10,012 chains
// with 5,000 Services) on every ADD and CHECK, about twice per pod.
func TestDetectCostsTheSameBesideKubeProxysTables(t *testing.T) {
	testns.RequireRoot(t)
	testns.FakeIPTablesTools(t)
	for _, tc := range []struct {
		mode string
		fill func(testing.TB, *testns.NS, int)
		want netfilter.Backend
	}{
		{"nftables", foreigntables.KubeProxyNFT, netfilter.NFTables},
		{"iptables", foreigntables.KubeProxyIPTables, netfilter.IPTables},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			small, big := testns.New(t), testns.New(t)
			tc.fill(t, small, 10)
			tc.fill(t, big, 1000)
			b, sentSmall, receivedSmall := detectRecorded(t, small)
			assert.Equal(t, tc.want, b, "beside 10 Services")
			b, sent, received := detectRecorded(t, big)
			assert.Equal(t, tc.want, b, "beside 1,000 Services")
			noChainDump(t, sent)
			assert.Equal(t, sentSmall, sent, "the same messages beside 10 Services and 1,000")
			assert.Equal(t, receivedSmall, received, "the same answers beside 10 Services and 1,000")
			assert.Less(t, received, 20, "what came back: %v", sent)
		})
	}
}
