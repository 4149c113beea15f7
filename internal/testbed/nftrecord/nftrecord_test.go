package nftrecord

import (
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestRecorderPassesThroughToTheKernel: what goes through a recorded connection reaches
// the kernel of the namespace (the table exists afterwards, an unknown one is ENOENT),
// and the recorder lists it: the lookups, then the transaction.
func TestRecorderPassesThroughToTheKernel(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	var r Recorder
	defer r.Close()
	n.Run(t, func() error {
		c, err := nftables.New(nftables.AsLasting(), r.Option())
		if err != nil {
			return err
		}
		defer c.CloseLasting()
		_, err = c.ListTableOfFamily("rec", nftables.TableFamilyIPv4)
		assert.Error(t, err, "no such table yet")
		c.AddTable(&nftables.Table{Name: "rec", Family: nftables.TableFamilyIPv4})
		if err := c.Flush(); err != nil {
			return err
		}
		_, err = c.ListTableOfFamily("rec", nftables.TableFamilyIPv4)
		return err
	})
	sent := r.Sent()
	require.Len(t, sent, 4, "%v", sent)
	assert.Equal(t, Request{Msg: unix.NFT_MSG_GETTABLE}, sent[0])
	assert.Equal(t, Request{Batch: true}, sent[1])
	assert.Equal(t, Request{Msg: unix.NFT_MSG_NEWTABLE}, sent[2])
	assert.Equal(t, 1, Batches(sent))
	r.Reset()
	assert.Empty(t, r.Sent())

	out, err := n.Exec(t, "nft", "list", "tables")
	require.NoError(t, err, out)
	assert.Contains(t, out, "table ip rec")
}

// TestRecorderCountsWhatTheKernelAnswers: a dump's size is in what comes back, one
// message per object, not in what was sent; Reset forgets it.
func TestRecorderCountsWhatTheKernelAnswers(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	var r Recorder
	defer r.Close()
	n.Run(t, func() error {
		c, err := nftables.New(nftables.AsLasting(), r.Option())
		if err != nil {
			return err
		}
		defer c.CloseLasting()
		tbl := c.AddTable(&nftables.Table{Name: "rec", Family: nftables.TableFamilyIPv4})
		for _, name := range []string{"a", "b", "c"} {
			c.AddChain(&nftables.Chain{Table: tbl, Name: name})
		}
		if err := c.Flush(); err != nil {
			return err
		}
		r.Reset()
		_, err = c.ListChains()
		return err
	})
	assert.Equal(t, []Request{{Msg: unix.NFT_MSG_GETCHAIN, Dump: true}}, r.Sent())
	assert.Equal(t, 3, r.Received(), "one message per chain")
	r.Reset()
	assert.Zero(t, r.Received())
}
