package hostlocal

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openTestStore opens n's store as an operation does, the index brought up to date.
func openTestStore(t *testing.T, n *network) *store {
	t.Helper()
	st, err := openStore(n.dataDir, n.name, false, io.Discard)
	require.NoError(t, err)
	require.NoError(t, st.refresh())
	return st
}

// TestReleaseRemovesTheFilesAndTheIndexFollows drives store.release directly, one by one
// (a DEL's few addresses) and a few at a time (a GC's many), with the index following
// entry by entry (fresh index) or rebuilt (after a walk): the released files go, the
// kept ones and their entries stay, and the sealed index tells each attachment its own.
func TestReleaseRemovesTheFilesAndTheIndexFollows(t *testing.T) {
	for _, count := range []int{2, manyFiles + 4} {
		for _, rebuild := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d-rebuild-%v", count, rebuild), func(t *testing.T) {
				n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
				for i := range 2 * count {
					n.mustAdd(fmt.Sprintf("c%d", i), "eth0")
				}
				st := openTestStore(t, n)
				var gone, kept []attachment
				var addrs []netip.Addr
				var keptRecs []record
				for i := range 2 * count {
					att := attachment{ID: fmt.Sprintf("c%d", i), IfName: "eth0"}
					held, entry := st.lookup(att)
					require.True(t, entry)
					require.Len(t, held, 1)
					if i%2 == 0 {
						gone, addrs = append(gone, att), append(addrs, held[0])
					} else {
						kept, keptRecs = append(kept, att), append(keptRecs, record{Addr: held[0], Owner: att, Valid: true})
					}
				}
				ch := indexChange{rebuild: rebuild, kept: keptRecs}
				if !rebuild {
					ch.entries = map[attachment]bool{}
					for _, att := range gone {
						ch.entries[att] = true
					}
				}
				released, err, indexErr := st.release(addrs, ch)
				require.NoError(t, err)
				require.NoError(t, indexErr)
				assert.Equal(t, count, released)
				st.seal()
				st.close()

				assert.Len(t, n.reservations(), count)
				st = openTestStore(t, n)
				defer st.close()
				assert.True(t, st.current, "the index was sealed")
				for _, att := range gone {
					held, entry := st.lookup(att)
					assert.Empty(t, held, att)
					assert.False(t, entry, "%s's entry is gone", att)
				}
				for i, att := range kept {
					held, _ := st.lookup(att)
					assert.Equal(t, []netip.Addr{keptRecs[i].Addr}, held, att)
				}
			})
		}
	}
}

// TestStaleAnswersAlikeFromTheIndexAndTheWalk: GC's listing says the same whether a
// fresh index or the directory walk answered: exactly the reservations of the
// attachments keep refuses, garbage included, go, and the index change fits the source.
func TestStaleAnswersAlikeFromTheIndexAndTheWalk(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("keep", "eth0")        // .2
	n.mustAdd("gone", "eth0")        // .3
	n.mustAdd("keep", "eth1")        // .4
	n.writeReference("10.1.0.9", "") // names no attachment
	keep := func(att attachment) bool { return att.ID == "keep" }
	for _, fresh := range []bool{true, false} {
		st := openTestStore(t, n)
		st.seal()
		if !fresh {
			// Moves the directory's mtime off the seal's stamp, as any writer but us does.
			now := time.Now()
			require.NoError(t, os.Chtimes(n.dir(), now, now))
		}
		require.Equal(t, fresh, st.fresh())
		released, ch, err := st.stale(keep)
		st.close()
		require.NoError(t, err)
		assert.ElementsMatch(t, []netip.Addr{netip.MustParseAddr("10.1.0.3"), netip.MustParseAddr("10.1.0.9")}, released)
		var kept []string
		for _, r := range ch.kept {
			kept = append(kept, fmt.Sprintf("%s %s", r.Addr, r.Owner))
		}
		assert.ElementsMatch(t, []string{"10.1.0.2 keep/eth0", "10.1.0.4 keep/eth1"}, kept)
		assert.Equal(t, !fresh, ch.rebuild, "a walk rebuilds the index")
		if fresh {
			assert.Equal(t, map[attachment]bool{{ID: "gone", IfName: "eth0"}: true}, ch.entries, "only gone's entry is rewritten")
		}
	}
}
