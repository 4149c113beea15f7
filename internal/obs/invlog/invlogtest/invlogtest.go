// Package invlogtest reads an invocation log back for tests: every line of the log and
// its rotated files, each required to be one JSON object and a log entry.
package invlogtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/obs/invlog"
)

// Lines returns the entries of the log at path, oldest first; a line that is no JSON
// object or no entry (a torn line) fails the test. A log not written yet has none.
func Lines(t testing.TB, path string) []invlog.Entry {
	t.Helper()
	var out []invlog.Entry
	r := &invlog.Reader{Path: path}
	require.NoError(t, r.Read(context.Background(), func(e *invlog.Entry, line []byte) error {
		require.True(t, json.Valid(line), "a line is one JSON object: %s", line)
		out = append(out, *e)
		return nil
	}))
	require.Zero(t, r.Bad, "no torn or foreign line in %s", path)
	return out
}
