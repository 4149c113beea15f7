package hostlocal

import (
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// TestReferenceLayoutIsReadExtendedAndReleased starts from a directory exactly as the
// reference plugin leaves it: a current reservation, a pre-v0.8.0 id-only one, its
// round-robin file and its lock.
func TestReferenceLayoutIsReadExtendedAndReleased(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.writeReference("10.1.0.2", "ref\r\neth0")
	n.writeReference("10.1.0.3", "legacy")
	n.writeReference("last_reserved_ip.0", "10.1.0.3")
	n.writeReference("lock", "")

	res := n.mustAdd("ours", "eth0")
	assert.Equal(t, []string{"10.1.0.4/24"}, addrs(res), "round-robin continues after the reference's last address")
	_, err := n.add("ref", "eth0")
	require.ErrorContains(t, err, "10.1.0.2 has been allocated to ref, duplicate allocation is not allowed")

	_, _, err = n.invoke(skel.CmdCheck, "legacy", "eth0", "")
	require.NoError(t, err, "an id-only reservation satisfies CHECK")

	require.NoError(t, n.del("ref", "eth0"))
	require.NoError(t, n.del("legacy", "eth0"))
	assert.Equal(t, map[string]string{"10.1.0.4": "ours\r\neth0"}, n.reservations())
	last, err := os.ReadFile(filepath.Join(n.dir(), "last_reserved_ip.0"))
	require.NoError(t, err)
	assert.Equal(t, "10.1.0.4", string(last))
	require.NoError(t, n.del("ours", "eth0"))
	assert.Empty(t, n.reservations())
	_, err = os.Stat(filepath.Join(n.dir(), "lock"))
	assert.NoError(t, err, "the lock file stays")
}

// TestReservationsMadeBehindOurBackAreSeen plays the reference plugin writing to the
// directory after our index was sealed.
func TestReservationsMadeBehindOurBackAreSeen(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("ours", "eth0")
	n.writeReference("10.1.0.50", "ref\r\neth0")
	_, err := n.add("ref", "eth0")
	require.ErrorContains(t, err, "duplicate allocation is not allowed")
	require.NoError(t, n.del("ref", "eth0"))
	assert.Equal(t, []string{"10.1.0.2"}, sortedKeys(n.reservations()))

	// The reference releasing one of ours: our index must not hand out stale owners.
	require.NoError(t, os.Remove(filepath.Join(n.dir(), "10.1.0.2")))
	res := n.mustAdd("ours", "eth0")
	assert.Equal(t, []string{"10.1.0.3/24"}, addrs(res))
}

// TestNothingInTheDataDirLooksLikeAReservationToTheReference applies the reference's
// release rule (recursive walk, read every file it can, match the trimmed content) to
// everything we leave behind.
func TestNothingInTheDataDirLooksLikeAReservationToTheReference(t *testing.T) {
	n := newNetwork(t, obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/64"})}})
	ids := []string{"a", "10.1.0.2", "b", strings.Repeat("x", 250)}
	for _, id := range ids {
		n.mustAdd(id, "eth0")
	}
	matches := map[string]int{}
	require.NoError(t, filepath.WalkDir(n.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil // the reference skips what it cannot read
		}
		content := strings.TrimSpace(string(data))
		for _, id := range ids {
			if content == id+"\r\neth0" || content == id {
				matches[id]++
				assert.Contains(t, []string{"10.1.", "fd00:"}, filepath.Base(path)[:5], "%s matches %q", path, id)
			}
		}
		return nil
	}))
	for _, id := range ids {
		assert.Equal(t, 2, matches[id], "exactly the two reservations of %q match", id)
	}
}

func TestGarbageReservationFilesDoNotBreakAllocationAndGCReclaimsThem(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.writeReference("10.1.0.2", "")
	n.writeReference("10.1.0.3", "not a\nreservation")
	res, stderr, err := n.invoke(skel.CmdAdd, "a", "eth0", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"10.1.0.4/24"}, addrs(res))
	assert.Contains(t, stderr, "10.1.0.2")
	assert.Contains(t, stderr, "10.1.0.3")

	n.extra = obj{"cni.dev/valid-attachments": []obj{{"containerID": "a", "ifname": "eth0"}}}
	_, _, err = n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"10.1.0.4": "a\r\neth0"}, n.reservations())
}

func TestGCReleasesExactlyTheStaleReservations(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("keep", "eth0")            // .2
	n.mustAdd("keep", "eth1")            // .3 stale: only keep/eth0 is valid
	n.mustAdd("gone", "eth0")            // .4 stale
	n.writeReference("10.1.0.9", "keep") // legacy id-only, id is valid
	n.writeReference("10.1.0.10", "old") // legacy id-only, id unknown
	n.writeReference(".tmp-reserve-123", "gone\r\neth0")
	n.extra = obj{"cni.dev/valid-attachments": []obj{{"containerID": "keep", "ifname": "eth0"}}}
	_, _, err := n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"10.1.0.2": "keep\r\neth0", "10.1.0.9": "keep"}, n.reservations())
	for _, name := range []string{"lock", "last_reserved_ip.0"} {
		_, err := os.Stat(filepath.Join(n.dir(), name))
		assert.NoError(t, err, "%s untouched", name)
	}
	_, err = os.Stat(filepath.Join(n.dir(), ".tmp-reserve-123"))
	assert.True(t, os.IsNotExist(err), "crash leftovers removed")

	// The index agrees with the directory afterwards: the stale attachment can be added again.
	n.extra = obj{}
	res := n.mustAdd("gone", "eth0")
	assert.Equal(t, []string{"10.1.0.5/24"}, addrs(res))
}

func TestGCWithoutStateSucceeds(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	_, _, err := n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
}

func TestStatus(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
		_, _, err := n.invoke(skel.CmdStatus, "", "", "")
		require.NoError(t, err)
	})
	t.Run("exhausted range set", func(t *testing.T) {
		n := newNetwork(t, obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "10.2.0.0/30"})}})
		n.mustAdd("a", "eth0")
		_, _, err := n.invoke(skel.CmdStatus, "", "", "")
		require.Error(t, err)
		assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err))
		assert.Contains(t, err.Error(), "range set 1 (10.2.0.1-10.2.0.2) is exhausted")
		require.NoError(t, n.del("a", "eth0"))
		_, _, err = n.invoke(skel.CmdStatus, "", "", "")
		require.NoError(t, err)
	})
	t.Run("garbage counts as taken", func(t *testing.T) {
		n := newNetwork(t, obj{"subnet": "10.1.0.0/30"})
		n.writeReference("10.1.0.2", "")
		_, _, err := n.invoke(skel.CmdStatus, "", "", "")
		assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err))
	})
	t.Run("unusable data dir", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "not-a-dir")
		require.NoError(t, os.WriteFile(file, nil, 0o600))
		n := newNetwork(t, obj{"subnet": "10.1.0.0/24", "dataDir": file})
		_, _, err := n.invoke(skel.CmdStatus, "", "", "")
		require.Error(t, err)
		assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err))
		assert.Contains(t, err.Error(), "unusable")
	})
}

func TestLongAttachmentNamesAreIndexed(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	id := strings.Repeat("c", 300)
	n.mustAdd(id, "eth0")
	_, err := n.add(id, "eth0")
	require.ErrorContains(t, err, "duplicate allocation")
	require.NoError(t, n.del(id, "eth0"))
	assert.Empty(t, n.reservations())
}

func TestParseReservation(t *testing.T) {
	cases := []struct {
		in   string
		want attachment
		ok   bool
	}{
		{"c1\r\neth0", attachment{"c1", "eth0"}, true},
		{"c1\r\neth0\n", attachment{"c1", "eth0"}, true},
		{"c1", attachment{ID: "c1"}, true},
		{"  c1 \n", attachment{ID: "c1"}, true},
		{"", attachment{}, false},
		{"c 1", attachment{}, false},
		{"c1\r\n", attachment{ID: "c1"}, true},
		{"c1\neth0", attachment{}, false},
		{"\x00\x00", attachment{}, false},
	}
	for _, tc := range cases {
		got, ok := parseReservation([]byte(tc.in))
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}

func TestLastReservedIsReplacedAndLeavesNoTemp(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	require.NoError(t, os.MkdirAll(n.dir(), 0o755))
	st, err := openStore(n.dataDir, n.name, false, io.Discard)
	require.NoError(t, err)
	defer st.close()
	for _, a := range []string{"10.1.0.2", "10.1.0.3"} { // first created, then replaced
		require.NoError(t, st.setLastReserved(0, netip.MustParseAddr(a)))
		got, err := os.ReadFile(filepath.Join(n.dir(), "last_reserved_ip.0"))
		require.NoError(t, err)
		assert.Equal(t, a, string(got))
		left, err := filepath.Glob(filepath.Join(n.dir(), ".tmp-*"))
		require.NoError(t, err)
		assert.Empty(t, left)
	}
	// A directory in the way is swapped back and left alone; the error is reported.
	require.NoError(t, os.Mkdir(filepath.Join(n.dir(), "last_reserved_ip.1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n.dir(), "last_reserved_ip.1", "keep"), nil, 0o600))
	assert.Error(t, st.setLastReserved(1, netip.MustParseAddr("10.1.0.4")))
	_, err = os.Stat(filepath.Join(n.dir(), "last_reserved_ip.1", "keep"))
	assert.NoError(t, err)
	left, err := filepath.Glob(filepath.Join(n.dir(), ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}

// TestGCWithAFreshIndexReleasesTheStaleAndKeepsTheIndexRight: after our own ADDs the
// index is sealed, and GC takes the owners of kept addresses from it instead of reading
// every reservation; what it releases is still read from the file, and the index
// entries of the attachments that lost addresses are rewritten, so later operations
// agree with the directory.
func TestGCWithAFreshIndexReleasesTheStaleAndKeepsTheIndexRight(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("keep", "eth0") // .2
	n.mustAdd("keep", "eth1") // .3 stale: only keep/eth0 is valid
	n.mustAdd("gone", "eth0") // .4 stale
	n.extra = obj{"cni.dev/valid-attachments": []obj{{"containerID": "keep", "ifname": "eth0"}}}
	_, _, err := n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"10.1.0.2": "keep\r\neth0"}, n.reservations())

	n.extra = obj{}
	_, err = n.add("keep", "eth0")
	assert.ErrorContains(t, err, "10.1.0.2 has been allocated to keep", "the index still gives keep/eth0 its address")
	assert.Equal(t, []string{"10.1.0.5/24"}, addrs(n.mustAdd("gone", "eth0")), "a released attachment is new to the index")
	require.NoError(t, n.del("keep", "eth0"))
	assert.Equal(t, map[string]string{"10.1.0.5": "gone\r\neth0"}, n.reservations())
}

// TestGCWithAFreshIndexDoesNotReadTheReservationsItKeeps: a reservation of a valid
// attachment is kept on the index's word, unread, even one rewritten in place behind
// the index's back (which moves no directory mtime, so the seal cannot see it) to name
// an attachment that is gone: GC releases only what it read, and keeping is the safe
// side of that disagreement. Reading every file was most of GC's time at 60,000.
func TestGCWithAFreshIndexDoesNotReadTheReservationsItKeeps(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("keep", "eth0") // .2
	n.mustAdd("gone", "eth0") // .3
	f, err := os.OpenFile(filepath.Join(n.dir(), "10.1.0.2"), os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString("other\r\neth0")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	n.extra = obj{"cni.dev/valid-attachments": []obj{{"containerID": "keep", "ifname": "eth0"}}}
	_, _, err = n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"10.1.0.2": "other\r\neth0"}, n.reservations(), "gone's .3 released, .2 kept unread")
}
