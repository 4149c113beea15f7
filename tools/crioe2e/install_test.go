//go:build crio

package crioe2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// TestCNIInstallUnderCRIOsWatch: CRI-O watches the conf dir and the plugin dir with
// fsnotify and polls the network's STATUS. cni install rewrites both under its eyes,
// from one layout to the other and back, with pods up: CRI-O reloads the config, its
// STATUS never says the network is not ready, the pods added before are deleted by the
// new layout leaving nothing, and new pods come up.
func TestCNIInstallUnderCRIOsWatch(t *testing.T) {
	bin, err := cnibuild.Binary(runtime.GOARCH)
	require.NoError(t, err)
	dir := nodeDir(t)
	src := filepath.Join(dir, "src", "10-net.conflist")
	require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o755))
	require.NoError(t, os.WriteFile(src, []byte(crioList), 0o644))
	binDir, confDir := filepath.Join(dir, "bin"), filepath.Join(dir, "net.d")
	install := func(flag string) {
		out, err := exec.Command(bin, "install", "--dir", binDir, flag, src, "--conf-dir", confDir).CombinedOutput()
		require.NoError(t, err, "cni install %s: %s", flag, out)
	}
	// The node's dirs are cni install's from the start, as a DaemonSet leaves them.
	install("--conf")
	n := startCRIOWith(t, crinode.Options{Dir: filepath.Join(dir, "node"), BinDir: binDir, ConfDir: confDir,
		Pause: pause, PauseArchive: pauseArchive, CRIO: crioPrograms(t)})
	peer, base := withPeer(t, n)

	before := []*podtest.Pod{newPod("old-1", 8100, "1M"), newPod("old-2", 8101, "")}
	for _, p := range before {
		p.Run(t, n)
	}

	// Ask for the runtime's status all along, as kubelet does (CRI-O asks the
	// plugins' STATUS on its own schedule; a failure shows here as not ready).
	var (
		mu       sync.Mutex
		notReady []string
		polls    int
	)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			err := n.CRI.NetworkReady()
			mu.Lock()
			polls++
			if err != nil {
				notReady = append(notReady, err.Error())
			}
			mu.Unlock()
		}
	}()
	reinstall := func(flag string) {
		install(flag)
		// A pod on the new layout, once CRI-O has reloaded (RunPodSandbox waits for a
		// ready network; a pod on a half-written layout fails).
		p := newPod("during"+flag, 8102, "15M")
		p.Run(t, n)
		p.Reach(t, peer)
		p.StopAndRemove(t, n)
	}
	reinstall("--one-exec")
	reinstall("--conf")
	reinstall("--one-exec")
	close(stop)
	<-stopped

	mu.Lock()
	assert.Empty(t, notReady, "CRI-O's network stays ready through the installs (%d polls)", polls)
	mu.Unlock()
	assert.Contains(t, n.Log(), "CNI monitoring event", "CRI-O saw the installs")
	for _, p := range before {
		p.Reach(t, peer)
		p.StopAndRemove(t, n)
	}
	after := newPod("new", 8103, "1M")
	after.Run(t, n)
	after.Reach(t, peer)
	after.StopAndRemove(t, n)
	requireNothingLeft(t, n, base)
}
