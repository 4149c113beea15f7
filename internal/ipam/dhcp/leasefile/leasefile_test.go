package leasefile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func record(id string) *leasefile.Record {
	return &leasefile.Record{ClientID: id, ContainerID: "c", Network: "n", IfName: "eth0", Netns: "/run/netns/c",
		ID: linkid.ID{HWAddr: "02:00:00:00:00:01"}, ACK: []byte{1, 2, 3}, Bound: time.Unix(1700000000, 0).UTC(),
		Provide: []leasefile.Option{{Code: 12, Value: []byte("web")}}, Request: []int{1, 3}, Priority: 5}
}

func TestSaveLoadRemove(t *testing.T) {
	s, err := leasefile.Open(filepath.Join(t.TempDir(), "leases"))
	require.NoError(t, err)
	a, b := record("c/n/eth0"), record("d/n/eth0")
	require.NoError(t, s.Save(a))
	require.NoError(t, s.Save(b))
	a.Priority = 9
	require.NoError(t, s.Save(a), "a second save replaces the record")

	got, errs := s.Load()
	require.Empty(t, errs)
	require.Len(t, got, 2)
	byID := map[string]*leasefile.Record{}
	for _, r := range got {
		byID[r.ClientID] = r
	}
	assert.Equal(t, a, byID[a.ClientID])
	assert.Equal(t, b, byID[b.ClientID])

	require.NoError(t, s.Remove(a.ClientID))
	require.NoError(t, s.Remove(a.ClientID), "removing twice")
	got, _ = s.Load()
	assert.Len(t, got, 1)
}

func TestTempNamesAreNoLongerThanFinalNamesAndLeftoversGo(t *testing.T) {
	dir := t.TempDir()
	s, err := leasefile.Open(dir)
	require.NoError(t, err)
	require.NoError(t, s.Save(record("x/n/eth0")))
	final := leasefile.FileName("x/n/eth0")
	leftover := "." + final[:64] + ".9999"
	assert.LessOrEqual(t, len(leftover), len(final))
	require.NoError(t, os.WriteFile(filepath.Join(dir, leftover), []byte("half"), 0o600))

	got, errs := s.Load()
	assert.Empty(t, errs)
	assert.Len(t, got, 1)
	_, err = os.Stat(filepath.Join(dir, leftover))
	assert.True(t, os.IsNotExist(err), "a temp file left by a crash is removed")
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1)
}

func TestLoadSkipsDamagedFilesAndSymlinks(t *testing.T) {
	dir := t.TempDir()
	s, err := leasefile.Open(dir)
	require.NoError(t, err)
	require.NoError(t, s.Save(record("good/n/eth0")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, leasefile.FileName("bad/n/eth0")), []byte("{"), 0o600))
	other := filepath.Join(t.TempDir(), "elsewhere")
	require.NoError(t, os.WriteFile(other, []byte(`{"clientID":"sym/n/eth0","ack":"AQ=="}`), 0o600))
	require.NoError(t, os.Symlink(other, filepath.Join(dir, leasefile.FileName("sym/n/eth0"))))
	// A record under another record's name is not trusted either.
	moved, err := os.ReadFile(filepath.Join(dir, leasefile.FileName("good/n/eth0")))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, leasefile.FileName("moved/n/eth0")), moved, 0o600))

	got, errs := s.Load()
	require.Len(t, got, 1)
	assert.Equal(t, "good/n/eth0", got[0].ClientID)
	assert.Len(t, errs, 3)
}

// A FIFO named like a lease file would block an open without O_NONBLOCK until a writer
// came, and the daemon would never get to serving: it is reported and skipped, as is a
// symlink, and the real leases still load.
func TestLoadSkipsAFIFOAndASymlinkNamedLikeLeases(t *testing.T) {
	dir := t.TempDir()
	s, err := leasefile.Open(dir)
	require.NoError(t, err)
	require.NoError(t, s.Save(record("good/n/eth0")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, leasefile.FileName("fifo/n/eth0")), 0o600))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(dir, leasefile.FileName("zero/n/eth0"))))

	got, errs := s.Load()
	require.Len(t, got, 1)
	assert.Equal(t, "good/n/eth0", got[0].ClientID)
	require.Len(t, errs, 2)
	for _, err := range errs {
		assert.True(t, statedir.IsForeign(err), "%v", err)
	}
}

// FuzzDecode: a lease file's content never panics the loader.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"clientID":"c/n/eth0","containerID":"c","network":"n","ifName":"eth0","netns":"/x","hwAddr":"02:00:00:00:00:01","ack":"AQID","bound":"2024-01-01T00:00:00Z","provide":[{"code":12,"value":"d2Vi"}],"request":[1,3]}`))
	f.Add([]byte(`{"clientID":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := leasefile.Decode(data, "")
		if err == nil && (r.ClientID == "" || len(r.ACK) == 0) {
			t.Fatalf("accepted a record without client id or ACK: %+v", r)
		}
	})
}

// A lease dir others may write is refused (the daemon would act on what they plant);
// one only the daemon's user writes is used, whoever may read it.
func TestOpenRefusesADirOthersMayWrite(t *testing.T) {
	for mode, ok := range map[os.FileMode]bool{0o700: true, 0o755: true, 0o777: false, 0o770: false, 0o702: false} {
		dir := filepath.Join(t.TempDir(), "leases")
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.Chmod(dir, mode))
		s, err := leasefile.Open(dir)
		if ok {
			require.NoError(t, err, "%04o", mode)
			require.NoError(t, s.Close())
			continue
		}
		require.ErrorIs(t, err, leasefile.ErrNotPrivate, "%04o", mode)
		assert.ErrorContains(t, err, dir)
	}
}

func TestOpenRefusesADirOfAnotherUser(t *testing.T) {
	testns.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "leases")
	require.NoError(t, os.Mkdir(dir, 0o700))
	require.NoError(t, os.Chown(dir, 65534, 65534))
	_, err := leasefile.Open(dir)
	assert.ErrorIs(t, err, leasefile.ErrNotPrivate)
}

// A DHCPv6 record of an attachment lives beside its DHCPv4 one, and the DHCPv4 one keeps
// the name earlier versions gave it.
func TestBothFamiliesOfAnAttachmentAreKeptApart(t *testing.T) {
	dir := t.TempDir()
	s, err := leasefile.Open(dir)
	require.NoError(t, err)
	v4, v6 := record("c/n/eth0"), record("c/n/eth0")
	v6.Family = leasefile.DHCPv6
	require.NoError(t, s.Save(v4))
	require.NoError(t, s.Save(v6))
	assert.FileExists(t, filepath.Join(dir, leasefile.FileName("c/n/eth0")), "the DHCPv4 name is the client id's digest, as before")
	assert.NotEqual(t, v4.Key(), v6.Key())

	got, errs := s.Load()
	require.Empty(t, errs)
	require.Len(t, got, 2)
	require.NoError(t, s.Remove(v6.Key()))
	got, _ = s.Load()
	require.Len(t, got, 1)
	assert.Equal(t, leasefile.DHCPv4, got[0].Family)

	_, err = leasefile.Decode([]byte(`{"family":"ipx","clientID":"c/n/eth0","ack":"AQ=="}`), "")
	assert.ErrorContains(t, err, `unknown family "ipx"`, "the message names the family as the file spells it")
}

func TestFamilyStringIsTheProtocolsName(t *testing.T) {
	assert.Equal(t, "DHCPv4", leasefile.DHCPv4.String())
	assert.Equal(t, "DHCPv6", leasefile.DHCPv6.String())
	assert.Equal(t, "no DHCPv6 lease", fmt.Sprintf("no %s lease", leasefile.DHCPv6))
	b, err := json.Marshal(leasefile.DHCPv6)
	require.NoError(t, err)
	assert.JSONEq(t, `"dhcpv6"`, string(b), "the file keeps the family's own value")
}
