package install

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestTempNamesAreHiddenAndRecognised(t *testing.T) {
	dir := t.TempDir()
	for _, final := range []string{"ab", "ptp", "cni", strings.Repeat("x", 255)} {
		var tmp string
		err := place(filepath.Join(dir, final), func(p string) error {
			tmp = p
			return os.WriteFile(p, nil, 0o600)
		})
		require.NoError(t, err)
		assert.FileExists(t, filepath.Join(dir, final))
		assert.NoFileExists(t, tmp, "renamed over the final name")
		assert.Equal(t, dir, filepath.Dir(tmp))
		assert.True(t, isTempName(filepath.Base(tmp)), tmp)
		assert.Less(t, len(filepath.Base(tmp)), 64, "far below NAME_MAX whatever the final name")
	}
	// A foreign dotfile, or the record and KeptDir, is never taken for one of ours.
	for _, n := range []string{".ab", ".cni-install", KeptDir, ".cni-tmp-", ".cni-tmp-0123456789abcdeg", "cni-tmp-0123456789abcdef"} {
		assert.False(t, isTempName(n), n)
	}
}

func TestPlaceRetriesTakenNames(t *testing.T) {
	final := filepath.Join(t.TempDir(), "ab")
	var tried []string
	err := place(final, func(tmp string) error {
		tried = append(tried, tmp)
		if len(tried) < 3 {
			return fs.ErrExist
		}
		return os.WriteFile(tmp, []byte("third"), 0o600)
	})
	require.NoError(t, err)
	assert.Len(t, tried, 3)
	data, err := os.ReadFile(final)
	require.NoError(t, err)
	assert.Equal(t, "third", string(data), "the third name's entry is put at final")
	err = place(final, func(string) error { return fs.ErrExist })
	assert.ErrorContains(t, err, "no free temporary name")
}

func TestPlaceLeavesNothingWhenCreateFails(t *testing.T) {
	dir := t.TempDir()
	err := place(filepath.Join(dir, "ab"), func(tmp string) error {
		require.NoError(t, os.WriteFile(tmp, []byte("half"), 0o600))
		return io.ErrShortWrite
	})
	require.ErrorIs(t, err, io.ErrShortWrite)
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, des)
}

func TestRecordRoundTrip(t *testing.T) {
	rec := record{}
	rec.add("10-a.conflist", []byte("a"))
	rec.add("10-a.conflist", []byte("b"))
	rec.add("20-b.conf", []byte("c"))
	got := parseRecord(rec.format())
	assert.Equal(t, rec, got)
	assert.True(t, got.holds("10-a.conflist", []byte("b")))
	assert.False(t, got.holds("20-b.conf", []byte("a")))
}

func TestRecordSkipsLinesThatAreNotOurs(t *testing.T) {
	sum := digest([]byte("x"))
	data := strings.Join([]string{
		sum + "  10-ok.conflist",
		sum + " one-space.conflist",
		strings.ToUpper(sum) + "  upper.conflist",
		sum[:63] + "  short.conflist",
		sum + "  ../escape.conflist",
		sum + "  .hidden.conflist",
		sum + "  notes.txt",
		sum + "  ",
		sum + "  sub/dir.conflist",
		sum + "  nul\x00.conflist",
		"",
	}, "\n")
	assert.Equal(t, record{"10-ok.conflist": {sum}}, parseRecord([]byte(data)))
}

// FuzzParseRecord: the record file sits in a directory other tools write to; whatever
// is in it must neither crash a run nor make a file outside the config names count as
// ours.
func FuzzParseRecord(f *testing.F) {
	sum := digest([]byte("x"))
	f.Add([]byte(sum + "  10-k8s.conflist\n"))
	f.Add([]byte(sum + "  10-k8s.conflist\n" + sum + "  99-loopback.conf\n"))
	f.Add([]byte("garbage\n\x00  \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := parseRecord(data)
		for name, sums := range rec {
			require.NoError(t, checkConfName(name))
			assert.NotContains(t, name, "/")
			for _, s := range sums {
				assert.Len(t, s, 64)
			}
		}
		assert.Equal(t, rec, parseRecord(rec.format()), "format and parse agree")
	})
}

// isBuildOfCni finds its line in the binary the build makes of cmd/cni: a moved main
// package would make every older cni at a reference plugin's name look foreign.
func TestTheCniBinaryHoldsItsBuildLine(t *testing.T) {
	ours, err := isBuildOfCni(testns.Binary(t))
	require.NoError(t, err)
	assert.True(t, ours)
	script := filepath.Join(t.TempDir(), "bridge")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho path github.com/cnikit/cni/cmd/cni\n"), 0o755))
	ours, err = isBuildOfCni(script)
	require.NoError(t, err)
	assert.False(t, ours)
}

func TestHoldsFindsTheNeedleAcrossChunks(t *testing.T) {
	needle := []byte(buildLine)
	const chunk = 64 << 10
	for _, at := range []int{0, 1, chunk - len(needle) - 1, chunk - len(needle), chunk - 5, chunk - 1, chunk, 3*chunk + 7} {
		data := make([]byte, at+len(needle)+10)
		copy(data[at:], needle)
		for _, r := range []io.Reader{bytes.NewReader(data), iotest.HalfReader(bytes.NewReader(data)), iotest.OneByteReader(bytes.NewReader(data))} {
			got, err := holds(r, needle)
			require.NoError(t, err)
			assert.True(t, got, "needle at %d, read by %T", at, r)
		}
		data[at+len(needle)-1] = 0
		got, err := holds(bytes.NewReader(data), needle)
		require.NoError(t, err)
		assert.False(t, got, "a needle cut short at %d", at)
	}
}

func TestWrapNamesTheActionOfAFailureOnly(t *testing.T) {
	assert.NoError(t, wrap("install /x", nil))
	err := wrap("install /x", fs.ErrPermission)
	assert.EqualError(t, err, "install /x: "+fs.ErrPermission.Error())
	assert.ErrorIs(t, err, fs.ErrPermission)
}
