package hostlocal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

const (
	workers   = 8
	perWorker = 100
)

// checkUnique fails on any address handed out twice.
func checkUnique(t *testing.T, got [][]string, perWorker int) {
	t.Helper()
	seen := map[string]string{}
	for w, list := range got {
		for i, a := range list {
			who := fmt.Sprintf("worker %d add %d", w, i)
			require.NotContains(t, seen, a, "%s got %s, already given to %s", who, a, seen[a])
			seen[a] = who
		}
	}
	assert.Len(t, seen, workers*perWorker)
}

// addDelInWorkers has workers goroutines each ADD perWorker attachments (ids
// prefix<worker>-<i>) of a network on subnet through run, then DEL them, all at once. However the ADDs
// interleave, no address is handed out twice or outside subnet, and once every DEL is
// done nothing is reserved and no temp file of a reservation's write is left.
func addDelInWorkers(t *testing.T, subnet string, perWorker int, prefix string,
	run func(n *network, cmd, id string) (*result.Result, error)) {
	t.Helper()
	n := newNetwork(t, obj{"subnet": subnet})
	got := make([][]string, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				res, err := run(n, skel.CmdAdd, fmt.Sprintf("%s%d-%d", prefix, w, i))
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], res.IPs[0].Address.Addr().String())
			}
			for i := 0; i < perWorker; i++ {
				if _, err := run(n, skel.CmdDel, fmt.Sprintf("%s%d-%d", prefix, w, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	checkUnique(t, got, perWorker)
	pool := netip.MustParsePrefix(subnet)
	for _, list := range got {
		for _, a := range list {
			assert.True(t, pool.Contains(netip.MustParseAddr(a)), "%s is outside %s", a, subnet)
		}
	}
	assert.Empty(t, n.reservations())
	tmp, err := filepath.Glob(filepath.Join(n.dir(), ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, tmp, "no temp file left")
}

func TestConcurrentAddDelInOneProcess(t *testing.T) {
	addDelInWorkers(t, "10.2.0.0/22", perWorker, "w", func(n *network, cmd, id string) (*result.Result, error) {
		res, _, err := n.invoke(cmd, id, "eth0", "")
		return res, err
	})
}

// runBinary execs host-local like a runtime would.
func runBinary(bin string, n *network, cmd, id string) (*result.Result, error) {
	c := exec.Command(bin)
	c.Env = execEnv(cmd, id, "eth0", filepath.Dir(bin))
	c.Stdin = bytes.NewReader(n.config())
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s %s", cmd, id, err, stdout.String(), stderr.String())
	}
	if cmd != skel.CmdAdd {
		return nil, nil
	}
	return result.Parse(stdout.Bytes(), n.version)
}

func hostLocalBinary(t *testing.T) string {
	return filepath.Join(testns.LinkPluginDir(t, "host-local"), "host-local")
}

func TestConcurrentAddDelProcesses(t *testing.T) {
	perWorker := perWorker
	if testing.Short() {
		perWorker = 25 // 400 processes instead of 1,600
	}
	bin := hostLocalBinary(t)
	addDelInWorkers(t, "10.3.0.0/22", perWorker, "p", func(n *network, cmd, id string) (*result.Result, error) {
		return runBinary(bin, n, cmd, id)
	})
}

// TestKilledAddsLoseNoAddress kills ADDs at random moments; GC with no valid
// attachment must then leave nothing behind and the whole pool must be allocatable.
func TestKilledAddsLoseNoAddress(t *testing.T) {
	bin := hostLocalBinary(t)
	n := newNetwork(t, obj{"subnet": "10.4.0.0/26"}) // .2-.62: 61 addresses
	// Kill within the time a whole ADD takes on this machine right now, so that the
	// signal lands before, during and after the work.
	var window time.Duration
	for i := 0; i < 3; i++ {
		start := time.Now()
		_, err := runBinary(bin, n, skel.CmdAdd, "probe")
		require.NoError(t, err)
		window = max(window, time.Since(start))
		_, err = runBinary(bin, n, skel.CmdDel, "probe")
		require.NoError(t, err)
	}
	completed := 0
	for i := 0; i < 40; i++ {
		c := exec.Command(bin)
		c.Env = execEnv(skel.CmdAdd, fmt.Sprintf("k%d", i), "eth0", filepath.Dir(bin))
		c.Stdin = bytes.NewReader(n.config())
		require.NoError(t, c.Start())
		time.Sleep(time.Duration(rand.Int64N(int64(window) * 5 / 4)))
		c.Process.Signal(syscall.SIGKILL)
		if c.Wait() == nil {
			completed++
		}
	}
	t.Logf("kill window %v: %d of 40 ADDs completed, %d reservations before GC", window, completed, len(n.reservations()))
	_, _, err := n.invoke(skel.CmdGC, "", "", "")
	require.NoError(t, err)
	assert.Empty(t, n.reservations())
	matches, err := filepath.Glob(filepath.Join(n.dir(), ".tmp-*"))
	require.NoError(t, err)
	assert.Empty(t, matches, "no temp file left")
	for i := 0; i < 61; i++ {
		id := fmt.Sprintf("after%d", i)
		if i < 3 {
			_, err = runBinary(bin, n, skel.CmdAdd, id)
		} else {
			_, err = n.add(id, "eth0") // the same code, without 58 more processes
		}
		require.NoError(t, err, "address %d of 61", i+1)
	}
}
