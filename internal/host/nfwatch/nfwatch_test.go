package nfwatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nfwatch"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestRemovesIsOnlyNftablesDeletions(t *testing.T) {
	nft := func(msg uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | msg }
	for _, msg := range []uint16{unix.NFT_MSG_DELTABLE, unix.NFT_MSG_DELCHAIN, unix.NFT_MSG_DELRULE,
		unix.NFT_MSG_DELSET, unix.NFT_MSG_DELSETELEM, unix.NFT_MSG_DELOBJ, unix.NFT_MSG_DELFLOWTABLE} {
		assert.True(t, nfwatch.Removes(nft(msg)), "%#x", msg)
	}
	for _, msg := range []uint16{unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_NEWRULE, unix.NFT_MSG_NEWSETELEM, unix.NFT_MSG_NEWGEN} {
		assert.False(t, nfwatch.Removes(nft(msg)), "%#x", msg)
	}
	assert.False(t, nfwatch.Removes(unix.NFNL_SUBSYS_CTNETLINK<<8|unix.NFT_MSG_DELTABLE), "another subsystem")
}

// TestRemovalsSignalsAFlushButNotAnAddition: in a namespace of the test's own, adding a
// table raises no signal, `nft flush ruleset` (sent over netlink as nft sends it) does.
func TestRemovalsSignalsAFlushButNotAnAddition(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	var w *nfwatch.Watcher
	host.Run(t, func() error {
		var err error
		w, err = nfwatch.Open()
		return err
	})
	t.Cleanup(func() { w.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- w.Removals(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Removals ends with its context")
		case <-time.After(10 * time.Second):
			t.Error("Removals did not end within 10 s of its context")
		}
	})
	nft := func(plan func(c *nftables.Conn)) {
		host.Run(t, func() error {
			c, err := nftables.New()
			if err != nil {
				return err
			}
			plan(c)
			return c.Flush()
		})
	}
	nft(func(c *nftables.Conn) { c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "t"}) })
	select {
	case <-out:
		t.Fatal("an addition was signalled")
	case <-time.After(300 * time.Millisecond):
	}
	nft(func(c *nftables.Conn) { c.FlushRuleset() })
	select {
	case <-out:
	case <-time.After(10 * time.Second):
		require.Fail(t, "the flush was not signalled within 10 s")
	}
}
