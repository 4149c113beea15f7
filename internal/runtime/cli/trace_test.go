package cli_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestVerbosePrintsTheTraceEveryPluginRunsUnder(t *testing.T) {
	e := newEnv(t)
	logFile := filepath.Join(t.TempDir(), "cni.log")
	e.extra = []string{"CNI_LOG_FILE=" + logFile}
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)

	r := e.cni(t, "", "add", "--verbose", "lo", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	m := regexp.MustCompile(`^cni add: trace ([0-9a-f]{32})\n$`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, "stderr: %q", r.stderr)
	r = e.cni(t, "", "del", "lo", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr, "no trace id without --verbose")

	r = e.cni(t, "", "log", "--file", logFile, "--json", "--trace", m[1])
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1, "the ADD's line alone: the DEL ran under a trace of its own")
	assert.Contains(t, lines[0], `"command":"ADD"`)
	assert.Contains(t, lines[0], `"traceID":"`+m[1]+`"`)
}
