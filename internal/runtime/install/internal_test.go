package install

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTempNameIsHiddenAndNoLongerThanFinal(t *testing.T) {
	for _, final := range []string{"ab", "ptp", "cni", "host-local", strings.Repeat("x", 255)} {
		name, err := tempName(final)
		require.NoError(t, err)
		assert.Len(t, name, len(final))
		assert.True(t, strings.HasPrefix(name, "."), name)
	}
	_, err := tempName("a")
	assert.Error(t, err)
}

func TestCreateTempRetriesTakenNames(t *testing.T) {
	dir := t.TempDir()
	final := filepath.Join(dir, "ab")
	// Take all but one of the 36 names ".x" a two-letter final name can use.
	for _, c := range tempChars[1:] {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "."+string(c)), nil, 0o644))
	}
	require.NoError(t, symlink("cni", final))
	link, err := os.Readlink(final)
	require.NoError(t, err)
	assert.Equal(t, "cni", link)
	assert.NoFileExists(t, filepath.Join(dir, "."+tempChars[:1]))
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
