package chain_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// recorder is the external test plugin, built once per test process (prebuilt in the
// full-kernel VM).
var recorder = testns.NewHelper("./testdata/recorder")

// TestMain removes the recorder once every test of the process is done with it.
func TestMain(m *testing.M) { recorder.Main(m) }

// pluginDir returns a CNI_PATH dir holding the recorder plus links to the cni binary
// under the given built-in names (for libcni, which execs everything).
func pluginDir(t testing.TB, builtins ...string) string {
	t.Helper()
	rec, err := recorder.Path()
	require.NoError(t, err)
	dir := testns.LinkPluginDir(t, builtins...)
	require.NoError(t, os.Symlink(rec, filepath.Join(dir, "recorder")))
	return dir
}

func newRunner(t testing.TB, dir string) *chain.Runner {
	return &chain.Runner{
		Builtin:    dispatch.Lookup,
		PluginPath: []string{dir},
		CacheDir:   t.TempDir(),
		Env:        os.Environ(),
	}
}

// recordingRunner makes what most runner tests start from: a container namespace, the
// file the recorder will write, and a runner whose plugin dir holds the recorder. It
// skips the test without root.
func recordingRunner(t *testing.T) (ctr *testns.NS, rec string, r *chain.Runner) {
	t.Helper()
	testns.RequireRoot(t)
	return testns.New(t), filepath.Join(t.TempDir(), "rec"), newRunner(t, pluginDir(t))
}

type record struct {
	Command string            `json:"command"`
	Env     map[string]string `json:"env"`
	Trace   map[string]string `json:"trace"`
	Stdin   string            `json:"stdin"`
}

func (r record) conf(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Stdin), &m))
	return m
}

func readRecords(t testing.TB, path string) []record {
	t.Helper()
	return pt.Records[record](t, path)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// parse is chain.Parse that fails the test on error.
func parse(t testing.TB, conf string) *chain.Network {
	t.Helper()
	n, err := chain.Parse([]byte(conf))
	require.NoError(t, err)
	return n
}

// loUp reports whether lo is up in n.
func loUp(t testing.TB, n *testns.NS) bool {
	t.Helper()
	lo, err := n.Handle(t).LinkByName("lo")
	require.NoError(t, err)
	return lo.Attrs().Flags&net.FlagUp != 0
}

func cacheFiles(t testing.TB, dir string) []string {
	return pt.Entries(t, filepath.Join(dir, "results"))
}

// recorderConf is a recorder plugin object writing to file, plus extra JSON keys.
func recorderConf(file string, extra ...string) string {
	return fmt.Sprintf(`{"type":"recorder","recordFile":%q%s}`, file, prefixComma(extra))
}

func prefixComma(extra []string) string {
	if len(extra) == 0 {
		return ""
	}
	return "," + strings.Join(extra, ",")
}

// requireBuiltins fails when a plugin the test needs is not in the registry: every
// plugin named here is part of the toolkit, so its absence is a build problem.
func requireBuiltins(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		require.NotNil(t, dispatch.Lookup(name), "plugin %q is not registered", name)
	}
}
