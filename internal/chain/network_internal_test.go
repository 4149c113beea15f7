package chain

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadParsedNamesTheFileOfEveryFailure holds the one reader of LoadFile, the
// drop-ins and the legacy files: the bytes and the parsed value, or an error naming the
// file whether reading or parsing failed.
func TestReadParsedNamesTheFileOfEveryFailure(t *testing.T) {
	dir := t.TempDir()
	good, bad, missing := filepath.Join(dir, "good.conf"), filepath.Join(dir, "bad.conf"), filepath.Join(dir, "missing.conf")
	require.NoError(t, os.WriteFile(good, []byte("42"), 0o600))
	require.NoError(t, os.WriteFile(bad, []byte("x"), 0o600))
	atoi := func(b []byte) (int, error) { return strconv.Atoi(string(b)) }

	data, v, err := readParsed(good, atoi)
	require.NoError(t, err)
	assert.Equal(t, "42", string(data))
	assert.Equal(t, 42, v)

	var invalid *InvalidError
	_, _, err = readParsed(bad, atoi)
	require.ErrorAs(t, err, &invalid)
	assert.Equal(t, bad, invalid.File)
	assert.True(t, errors.Is(err, strconv.ErrSyntax), "the parse error is kept: %v", err)

	_, _, err = readParsed(missing, atoi)
	require.ErrorAs(t, err, &invalid)
	assert.Equal(t, missing, invalid.File)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}
