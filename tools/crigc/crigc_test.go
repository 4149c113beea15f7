package crigc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/internal/critest"
)

func TestMain(m *testing.M) { cnibuild.Main(m) }

// serveCRI serves a runtime that knows the sandboxes ids, or fails every list with
// err, on a unix socket of the test's, and returns its path.
func serveCRI(t *testing.T, ids []string, err error) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cri.sock")
	r := &critest.Runtime{}
	r.Set(ids, err)
	critest.Serve(t, r, sock)
	return sock
}

// node is the CNI state of a node in the test's directories: one host-local network.
type node struct {
	o     Options
	ipam  string
	netns string // a network namespace of the test's: host-local never enters it
}

func newNode(t *testing.T, disableGC bool) *node {
	t.Helper()
	cni, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	dir := t.TempDir()
	n := &node{ipam: filepath.Join(dir, "ipam")}
	n.o = Options{
		CNI: cni, ConfDir: filepath.Join(dir, "net.d"), CacheDir: filepath.Join(dir, "cache"),
		CNIPath: filepath.Join(dir, "bin"), NetnsDir: filepath.Join(dir, "netns"),
		Settle: time.Minute, Timeout: 30 * time.Second, Log: testWriter{t},
	}
	require.NoError(t, os.MkdirAll(n.o.ConfDir, 0o755))
	conf := map[string]any{
		"cniVersion": "1.1.0", "name": "pods", "disableGC": disableGC,
		"plugins": []any{map[string]any{"type": "host-local", "ipam": map[string]any{
			"type": "host-local", "dataDir": n.ipam, "ranges": [][]any{{map[string]any{"subnet": "10.77.0.0/24"}}},
		}}},
	}
	data, err := json.Marshal(conf)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(n.o.ConfDir, "10-pods.conflist"), data, 0o644))
	sleep := exec.Command("unshare", "--net", "sleep", "600")
	require.NoError(t, sleep.Start())
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	n.netns = "/proc/" + strconv.Itoa(sleep.Process.Pid) + "/ns/net"
	require.Eventually(t, func() bool {
		own, err1 := os.Readlink("/proc/self/ns/net")
		its, err2 := os.Readlink(n.netns)
		return err1 == nil && err2 == nil && own != its
	}, 5*time.Second, 10*time.Millisecond, "unshare never entered a netns of its own")
	return n
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// add sets up an attachment as the runtime does: cached, reserved.
func (n *node) add(t *testing.T, cid string) {
	t.Helper()
	out, err := exec.Command(n.o.CNI, "add", "pods", n.netns, "--container-id", cid, "--conf-dir", n.o.ConfDir,
		"--cache-dir", n.o.CacheDir, "--cni-path", n.o.CNIPath).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// addUncached reserves an address for cid as the IPAM of an ADD that failed later in
// its chain and whose teardown failed too (containerd #12130): no cache entry.
func (n *node) addUncached(t *testing.T, cid string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "host-local.conf")
	data, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "pods", "type": "host-local", "ipam": map[string]any{
		"type": "host-local", "dataDir": n.ipam, "ranges": [][]any{{map[string]any{"subnet": "10.77.0.0/24"}}},
	}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(conf, data, 0o644))
	cmd := exec.Command(n.o.CNI, "exec", "host-local", "ADD", "--netns", n.netns, "--ifname", "eth0", "--container-id", cid, "--conf", conf)
	cmd.Env = append(os.Environ(), "CNI_PATH="+n.o.CNIPath)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// holders are the container ids holding a host-local reservation, and those cached.
func (n *node) holders(t *testing.T) (reserved, cached []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(n.ipam, "pods", "10.77.0.*"))
	require.NoError(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		id, _, _ := strings.Cut(strings.ReplaceAll(string(data), "\r", "\n"), "\n")
		reserved = append(reserved, id)
	}
	atts, err := cachedAttachments(filepath.Join(n.o.CacheDir, "results"))
	require.NoError(t, err)
	for _, a := range atts {
		cached = append(cached, a.ContainerID)
	}
	return reserved, cached
}

func TestRoundCollectsWhatNoListedSandboxHolds(t *testing.T) {
	n := newNode(t, false)
	n.add(t, "live-ready")
	n.add(t, "live-notready")
	n.add(t, "gone")                  // its sandbox removed while its DEL failed
	n.addUncached(t, "gone-add")      // its ADD failed half-way, its teardown too
	n.addUncached(t, "live-uncached") // its cache entry lost in a crash (containerd #12923)
	n.o.Socket = serveCRI(t, []string{"live-ready", "live-notready", "live-uncached"}, nil)

	require.NoError(t, Round(context.Background(), n.o))

	reserved, cached := n.holders(t)
	assert.ElementsMatch(t, []string{"live-ready", "live-notready", "live-uncached"}, reserved)
	assert.ElementsMatch(t, []string{"live-ready", "live-notready"}, cached)
}

func TestRoundCollectsNothingWhenTheRuntimeCannotBeAsked(t *testing.T) {
	for name, socket := range map[string]func(t *testing.T) string{
		"no socket":    func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing.sock") },
		"list fails":   func(t *testing.T) string { return serveCRI(t, nil, errors.New("store not loaded")) },
		"nobody there": deadSocket,
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, false)
			n.add(t, "pod")
			n.addUncached(t, "pod-uncached")
			n.o.Socket = socket(t)
			n.o.Timeout = 5 * time.Second

			err := Round(context.Background(), n.o)

			require.Error(t, err)
			assert.NotErrorIs(t, err, ErrBusy)
			reserved, cached := n.holders(t)
			assert.ElementsMatch(t, []string{"pod", "pod-uncached"}, reserved)
			assert.Equal(t, []string{"pod"}, cached)
		})
	}
}

// deadSocket is a unix socket nobody listens on any more, as containerd's after a crash.
func deadSocket(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "dead.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	return sock
}

func TestRoundHonoursDisableGC(t *testing.T) {
	n := newNode(t, true)
	n.add(t, "gone")
	n.addUncached(t, "gone-add")
	n.o.Socket = serveCRI(t, nil, nil)

	require.NoError(t, Round(context.Background(), n.o))

	reserved, cached := n.holders(t)
	assert.ElementsMatch(t, []string{"gone", "gone-add"}, reserved)
	assert.Equal(t, []string{"gone"}, cached)
}

func TestRoundSkipsWhileAPodNetnsIsYoung(t *testing.T) {
	n := newNode(t, false)
	n.add(t, "gone")
	n.addUncached(t, "in-add") // an ADD in flight: the runtime lists its sandbox only after
	n.o.Socket = serveCRI(t, nil, nil)
	require.NoError(t, os.MkdirAll(n.o.NetnsDir, 0o755))
	old := filepath.Join(n.o.NetnsDir, "cni-old")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	long := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(old, long, long))
	require.NoError(t, os.WriteFile(filepath.Join(n.o.NetnsDir, "cni-new"), nil, 0o644))

	err := Round(context.Background(), n.o)

	require.ErrorIs(t, err, ErrBusy)
	reserved, cached := n.holders(t)
	assert.ElementsMatch(t, []string{"gone", "in-add"}, reserved)
	assert.Equal(t, []string{"gone"}, cached)

	// Once the settle time has passed (the netns is as old as the other), the round runs.
	require.NoError(t, os.Chtimes(filepath.Join(n.o.NetnsDir, "cni-new"), long, long))
	require.NoError(t, Round(context.Background(), n.o))
	reserved, cached = n.holders(t)
	assert.Empty(t, reserved)
	assert.Empty(t, cached)
}

func TestValidArgsKeepEveryAttachmentOfALiveSandbox(t *testing.T) {
	got := validArgs([]string{"a", "b"}, []cachedAttachment{
		{ContainerID: "a", IfName: "net1"}, {ContainerID: "gone", IfName: "eth0"}, {ContainerID: "a", IfName: "eth0"},
	}, 2)
	assert.Equal(t, []string{
		"--valid", "a:net1", "--valid", "a:eth0",
		"--valid", "a:eth1", "--valid", "b:eth0", "--valid", "b:eth1",
	}, got)
}
