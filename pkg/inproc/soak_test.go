package inproc_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// The soak's size: `make test` runs the default; the full size is
// -soak.cycles=100000 (see docs/embedding.md).
var (
	soakCycles  = flag.Int("soak.cycles", 1000, "ADD/DEL cycles of TestSoakLeavesTheHostProcessAsItFoundIt")
	soakWorkers = flag.Int("soak.workers", 8, "goroutines running the soak's cycles at once")
)

// soakKinds is one round of what a cycle does; cycle i does soakKinds[i%len].
var soakKinds = []string{"plain", "check", "cancel", "plain", "panic", "plain", "cancel", "check"}

// panicWhere rotates the panicking cycles over the places a panic can come from.
var panicWhere = []string{"callback", "netns", "background"}

// soak is the soak test's world: one host namespace, a container namespace per worker,
// one cache and IPAM dir, and the two ways a host process calls us.
type soak struct {
	host     *testns.NS
	ctrs     []*testns.NS
	cacheDir string
	ipamDir  string
	lists    map[string]string
	// cancelledAdds counts the ADDs that a cancellation made fail.
	cancelledAdds atomic.Int64
}

// soakChain is a light chain (loopback, bridge with host-local), with extra plugins.
func (s *soak) chain(extra string) string {
	return `{"cniVersion":"1.1.0","name":"soak","plugins":[{"type":"loopback"},` +
		`{"type":"bridge","bridge":"cni-soak0","isGateway":true,` +
		`"ipam":{"type":"host-local","dataDir":"` + s.ipamDir + `","ranges":[[{"subnet":"10.79.0.0/16"}]]}}` + extra + `]}`
}

// TestSoakLeavesTheHostProcessAsItFoundIt runs ADD/DEL cycles of a light chain in one
// process, from many goroutines at once, half through libcni with our Exec and half
// through Runner, some cancelled mid-call and some with a plugin that panics, and then
// finds the process as it was before them: no goroutine, descriptor, thread or netlink
// socket more, every thread in the process's own namespace, the same working
// directory, environment, umask, signal dispositions and rlimits, and nothing left on
// disk, on the host or in the containers.
func TestSoakLeavesTheHostProcessAsItFoundIt(t *testing.T) {
	testns.RequireRoot(t)
	s := &soak{host: testns.New(t), cacheDir: t.TempDir(), ipamDir: filepath.Join(t.TempDir(), "ipam")}
	for range *soakWorkers {
		s.ctrs = append(s.ctrs, testns.New(t))
	}
	s.lists = map[string]string{"": s.chain("")}
	for _, where := range panicWhere {
		s.lists[where] = s.chain(`,{"type":"panicker","panic":"` + where + `","on":["ADD"]}`)
	}
	// A first round warms up what the process keeps for good once used (the runtime's
	// threads, the netlink families' ids) before the state the soak must keep is taken.
	require.NoError(t, s.run(len(soakKinds)*len(s.ctrs)))
	before := snapshot(t)

	start := time.Now()
	require.NoError(t, s.run(*soakCycles))
	t.Logf("%d cycles by %d goroutines in %v; %d of the ADDs cancelled mid-call failed", *soakCycles, len(s.ctrs),
		time.Since(start).Round(time.Millisecond), s.cancelledAdds.Load())

	after := settled(t, before)
	assert.LessOrEqual(t, after.goroutines, before.goroutines, "goroutines")
	assert.LessOrEqual(t, after.fds, before.fds, "file descriptors")
	assert.LessOrEqual(t, after.netlinkSockets, before.netlinkSockets, "netlink sockets")
	// The Go runtime keeps for good every thread it once needed (it never ends an idle
	// one), so a soak that reaches a higher peak of callers in system calls at once than
	// the warm-up did ends with a few more; a thread lost per call would be hundreds.
	assert.LessOrEqual(t, after.threads, before.threads+len(s.ctrs), "threads")
	assert.Empty(t, threadsOutsideOwnNetns(t), "threads left in another network namespace")
	assert.Equal(t, before.cwd, after.cwd, "working directory")
	assert.Equal(t, before.env, after.env, "environment")
	assert.Equal(t, before.umask, after.umask, "umask")
	assert.Equal(t, before.sigIgnored, after.sigIgnored, "ignored signals")
	assert.Equal(t, before.sigCaught, after.sigCaught, "caught signals")
	assert.Equal(t, before.limits, after.limits, "rlimits")
	s.requireNothingLeft(t)
}

// settled is the process's state once the goroutines and threads that end on their own
// (a call's last timers, threads leaving) have; it waits 10 s at most for them.
func settled(t *testing.T, before procState) procState {
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := snapshot(t)
		if after.goroutines <= before.goroutines && after.threads <= before.threads || time.Now().After(deadline) {
			return after
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run runs cycles cycles, spread over the workers, and returns their failures.
func (s *soak) run(cycles int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.ctrs))
	for w := range s.ctrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.host.Do(func() error { return s.worker(w, cycles) })
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// worker runs its share of cycles (every len(ctrs)-th) in its container, inside the
// host namespace; even workers go through libcni with our Exec, odd ones through
// Runner. It stops at the first failure.
func (s *soak) worker(w, cycles int) error {
	for i := w; i < cycles; i += len(s.ctrs) {
		if err := s.cycle(w, i); err != nil {
			return fmt.Errorf("worker %d, cycle %d (%s): %w", w, i, soakKinds[i%len(soakKinds)], err)
		}
	}
	return nil
}

// cycle is one ADD (and maybe CHECK) and the DEL that must always follow.
func (s *soak) cycle(w, i int) error {
	kind := soakKinds[i%len(soakKinds)]
	list := ""
	if kind == "panic" {
		list = panicWhere[(i/len(soakKinds))%len(panicWhere)]
	}
	ops, err := s.opsFor(w%2 == 0, s.lists[list], w, i)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if kind == "cancel" {
		// Somewhere in the ADD: from before the first plugin to after the last.
		time.AfterFunc(time.Duration(i%11)*time.Millisecond, cancel)
	}
	addErr := ops.add(ctx)
	switch {
	case kind == "panic":
		if inproc.Code(addErr) != 999 && !isCode(addErr, 999) {
			return fmt.Errorf("ADD with a panicking plugin: want code 999, got %v", addErr)
		}
	case kind == "cancel" && addErr != nil:
		s.cancelledAdds.Add(1)
	case addErr != nil:
		return fmt.Errorf("ADD: %w", addErr)
	case kind == "check":
		if err := ops.check(ctx); err != nil {
			return fmt.Errorf("CHECK: %w", err)
		}
	}
	delCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := ops.del(delCtx); err != nil {
		return fmt.Errorf("DEL (after ADD: %v): %w", addErr, err)
	}
	return nil
}

func isCode(err error, code uint) bool {
	var te *types.Error
	return errors.As(err, &te) && te.Code == code
}

// soakOps are one cycle's operations on its attachment.
type soakOps struct {
	add, check, del func(ctx context.Context) error
}

func (s *soak) opsFor(viaLibcni bool, conf string, w, i int) (soakOps, error) {
	id := fmt.Sprintf("soak-%d-%d", w, i)
	if viaLibcni {
		e := testExec()
		c := libcni.NewCNIConfigWithCacheDir([]string{s.cacheDir}, s.cacheDir, e)
		list, err := libcni.ConfListFromBytes([]byte(conf))
		if err != nil {
			return soakOps{}, err
		}
		rt := &libcni.RuntimeConf{ContainerID: id, NetNS: s.ctrs[w].Path, IfName: "eth0"}
		return soakOps{
			add:   func(ctx context.Context) error { _, err := c.AddNetworkList(ctx, list, rt); return err },
			check: func(ctx context.Context) error { return c.CheckNetworkList(ctx, list, rt) },
			del:   func(ctx context.Context) error { return c.DelNetworkList(ctx, list, rt) },
		}, nil
	}
	r := &inproc.Runner{PluginPath: []string{s.cacheDir}, CacheDir: s.cacheDir}
	r.SetLookup(inproc.WithPlugins(panicker(), sleeper()))
	n, err := inproc.Parse([]byte(conf))
	if err != nil {
		return soakOps{}, err
	}
	att := inproc.Attachment{ContainerID: id, Netns: s.ctrs[w].Path, IfName: "eth0"}
	return soakOps{
		add:   func(ctx context.Context) error { _, err := r.Add(ctx, n, att); return err },
		check: func(ctx context.Context) error { return r.Check(ctx, n, att) },
		del:   func(ctx context.Context) error { return r.Del(ctx, n, att) },
	}, nil
}

// addressFile is a host-local reservation: a file named after an address.
var addressFile = regexp.MustCompile(`^[0-9.]+$|^[0-9a-f:]+$`)

// requireNothingLeft checks that the cycles left no cache entry, no reserved address,
// no veth on the host and nothing but lo in the containers.
func (s *soak) requireNothingLeft(t *testing.T) {
	assert.Empty(t, entries(t, filepath.Join(s.cacheDir, "results")), "cache entries")
	for _, name := range entries(t, filepath.Join(s.ipamDir, "soak")) {
		assert.False(t, addressFile.MatchString(name), "address %s is still reserved", name)
	}
	out, err := s.host.Exec(t, "ip", "-br", "link", "show", "type", "veth")
	require.NoError(t, err, out)
	assert.Empty(t, out, "veths left on the host")
	for _, ctr := range s.ctrs {
		out, err := ctr.Exec(t, "ip", "-br", "-o", "link")
		require.NoError(t, err, out)
		assert.Regexp(t, `^lo\s+\S+\s+00:00:00:00:00:00 <LOOPBACK>\s*\n$`, out, "links left in a container")
	}
}
