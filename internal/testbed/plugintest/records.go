package plugintest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Records reads the file a recording test plugin writes, one JSON object a line (up to
// 1 MiB each), as Ts; none when the plugin never ran and so made no file.
func Records[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "record %q", sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}
