package chain

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
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

// TestPluginArgsAreTheOperationsWithTheAttachments holds the one builder of a plugin's
// CNI_* inputs, for the in-process, exec'd and repair invocations alike.
func TestPluginArgsAreTheOperationsWithTheAttachments(t *testing.T) {
	r := &Runner{PluginPath: []string{"/opt/cni/bin"}, Env: []string{"CNI_NETNS_OVERRIDE=1", "CNI_LOG_FILE=/l", "CNI_LOG_LEVEL=debug", "CNI_COMMAND=GC", "X=y"}}
	att := Attachment{ContainerID: "c1", Netns: "/n", IfName: "eth0", Args: [][2]string{{"K", "V"}, {"K2", "V2"}}}
	assert.Equal(t, skel.Args{
		Command: "DEL", ContainerID: "c1", Netns: "/n", IfName: "eth0", CNIArgs: "K=V;K2=V2", Path: []string{"/opt/cni/bin"},
		NetnsOverride: true, Env: r.Env, LogFile: "/l", LogLevel: "debug",
	}, pluginArgs(r.procEnv(), "DEL", &att))
}

// TestDecodeNumbersKeepsLargeIntegersExact holds the one decoder of plugin configs,
// capability args and the canonical re-encoding: no float64 on the way.
func TestDecodeNumbersKeepsLargeIntegersExact(t *testing.T) {
	var v map[string]any
	require.NoError(t, decodeNumbers([]byte(`{"burst":9223372036854775807,"rate":1.5}`), &v))
	assert.Equal(t, map[string]any{"burst": json.Number("9223372036854775807"), "rate": json.Number("1.5")}, v)
	assert.Error(t, decodeNumbers([]byte(`{"burst":`), &v))
}

// TestIsLegacyLeftoverTakesOnlyTheFormerWritersPattern holds what GC may remove from
// results/ itself: ".<entry>.tmp-<digits>" with an entry name, nothing else.
func TestIsLegacyLeftoverTakesOnlyTheFormerWritersPattern(t *testing.T) {
	for name, want := range map[string]bool{
		".net-c1-eth0.tmp-123":       true,
		".a.tmp-0":                   true,
		".net.tmp-1.tmp-42":          true,
		"net-c1-eth0":                false,
		"net-c1-eth0.tmp-123":        false, // no leading dot: an entry
		"..tmp-123":                  false, // no entry name
		".tmp-123":                   false,
		".net-c1-eth0.tmp-":          false,
		".net-c1-eth0.tmp-12a":       false,
		".net-c1-eth0.tmp-123.extra": false,
		".":                          false,
		"":                           false,
	} {
		assert.Equal(t, want, isLegacyLeftover(name), name)
	}
}
