package bridge

import (
	"net"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/testbed/foreigntables"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var spoofMAC = net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x02}

// spoofState sets up the spoof checks of keys in a fresh namespace beside a foreign
// bridge-family table of foreign chains.
func spoofState(t *testing.T, foreign int, keys ...spoofKey) *testns.NS {
	t.Helper()
	host := testns.New(t)
	foreigntables.Table(t, host, nftables.TableFamilyBridge, "theirs", foreign)
	host.Run(t, func() error {
		for i, k := range keys {
			if err := setupSpoofCheck(k, "veth"+string(rune('a'+i)), spoofMAC); err != nil {
				return err
			}
		}
		return nil
	})
	return host
}

// TestSpoofCheckTeardownReadsNothingOfAForeignTable: removing an attachment's spoof
// check (every ADD does it first, every DEL and GC) reads the base chain, never the
// bridge family's chains: beside a foreign bridge table of 2,000 chains it sends and
// receives what it does beside one of 10. It dumped every chain of the family.
func TestSpoofCheckTeardownReadsNothingOfAForeignTable(t *testing.T) {
	testns.RequireRoot(t)
	gone, kept := spoofKey{"net1", "ctr-gone", "eth0"}, spoofKey{"net1", "ctr-kept", "eth0"}
	teardown := func(host *testns.NS) ([]nftrecord.Request, int) {
		var r nftrecord.Recorder
		defer r.Close()
		host.Run(t, func() error {
			return removeSpoofChecks(func(k spoofKey) bool { return k.names(gone) }, gone.chain(), r.Option())
		})
		return r.Sent(), r.Received()
	}
	small, big := spoofState(t, 10, gone, kept), spoofState(t, 2000, gone, kept)
	sentSmall, receivedSmall := teardown(small)
	sent, received := teardown(big)
	for _, q := range sent {
		assert.False(t, q.Dump && q.Msg == unix.NFT_MSG_GETCHAIN, "a dump of the family's chains: %v", sent)
	}
	assert.Equal(t, sentSmall, sent)
	assert.Equal(t, receivedSmall, received, "beside 10 foreign chains and 2,000")

	rs := nfttest.Ruleset(t, big)
	assert.NotContains(t, rs, gone.chain())
	assert.Contains(t, rs, kept.chain())
	big.Run(t, func() error {
		assert.Error(t, checkSpoofCheck(gone))
		assert.NoError(t, checkSpoofCheck(kept))
		return nil
	})
}

// TestSpoofCheckTeardownRemovesAChainLeftWithoutItsJump: an attachment whose jump rule
// is gone (removed by hand, or a crash between two transactions of an older version)
// still has its chain removed, found by name.
func TestSpoofCheckTeardownRemovesAChainLeftWithoutItsJump(t *testing.T) {
	testns.RequireRoot(t)
	k := spoofKey{"net1", "ctr-half", "eth0"}
	host := spoofState(t, 1, k)
	nfttest.Apply(t, host, func(c *nftables.Conn) error {
		c.FlushChain(&nftables.Chain{Name: spoofBaseChain, Table: spoofTableRef()})
		return nil
	})
	require.Contains(t, nfttest.Ruleset(t, host), k.chain(), "premise: the chain without its jump")
	host.Run(t, func() error { return teardownSpoofCheck(k) })
	assert.NotContains(t, nfttest.Ruleset(t, host), k.chain())
	host.Run(t, func() error { return teardownSpoofCheck(k) }) // nothing left: no error
}
