package chain_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func tmpFiles(t testing.TB, cacheDir string) []string {
	return pt.Entries(t, filepath.Join(cacheDir, "results.tmp"))
}

func TestLongestCacheableContainerIDWorksAndOneMoreIsRefusedBeforeAnyPlugin(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"},`+recorderConf(rec)+`]}`)
	// "lo-" + id + "-eth0" is 255 bytes, the longest file name: libcni's limit too.
	att := chain.Attachment{ContainerID: pt.LongID(255 - len("lo--eth0")), Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo-" + att.ContainerID + "-eth0"}, cacheFiles(t, r.CacheDir))
	require.NoError(t, r.Check(context.Background(), n, att))
	require.NoError(t, r.Del(context.Background(), n, att))
	assert.Empty(t, cacheFiles(t, r.CacheDir))
	assert.Empty(t, tmpFiles(t, r.CacheDir))
	require.Len(t, readRecords(t, rec), 3)
	assert.ErrorContains(t, r.Check(context.Background(), n, att), "loopback interface is down", "CHECK after DEL fails: DEL took lo down")

	att.ContainerID += "x"
	_, err = r.Add(context.Background(), n, att)
	require.ErrorContains(t, err, "the cache entry <network>-<containerID>-<ifname> would be 256 bytes, the limit is 255")
	assert.Equal(t, uint(cnierror.CodeInvalidEnv), cnierror.Code(err))
	assert.False(t, loUp(t, ctr), "no plugin ran")
	assert.Len(t, readRecords(t, rec), 3)
	assert.Empty(t, cacheFiles(t, r.CacheDir), "the refused ADD cached nothing")
	assert.Empty(t, tmpFiles(t, r.CacheDir), "nor began to")
	require.NoError(t, r.Del(context.Background(), n, att), "DEL never refuses a long id: it needs no cache entry")
}

// plantLeftovers leaves what an interrupted write of the entry name leaves: the
// temporary file of this runner, and the former writer's ".<name>.tmp-<digits>", an
// hour old.
func plantLeftovers(t testing.TB, cacheDir, name string) {
	t.Helper()
	writeFile(t, filepath.Join(cacheDir, "results.tmp", name), `{"kind":"cniCacheV1"`)
	legacy := filepath.Join(cacheDir, "results", "."+name+".tmp-2747241752")
	writeFile(t, legacy, `{"kind":"cniCacheV1","containerId":"x","ifName":"eth0","networkName":"lo"}`)
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(legacy, old, old))
}

func TestDelAndGCRemoveLeftoversOfAnInterruptedCacheWrite(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	r := newRunner(t, t.TempDir())
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	plantLeftovers(t, r.CacheDir, "lo-c1-eth0")
	// Another attachment's: DEL of c1 leaves them, GC removes them.
	plantLeftovers(t, r.CacheDir, "lo-c2-eth0")
	// DEL removes c1's leftover in results.tmp; the former writer's ones in results/
	// are GC's, which lists the directory (DEL does not, to stay O(1) in the cache size).
	// Look-alikes of c1's former temporary files that belong to no write of c1: one of
	// the attachment on interface "eth0.tmp-1", and one of nobody.
	old := time.Now().Add(-time.Hour)
	for _, name := range []string{".lo-c1-eth0.tmp-1.tmp-2", ".lo-c1-eth0.tmp-x"} {
		writeFile(t, filepath.Join(r.CacheDir, "results", name), "{}")
		require.NoError(t, os.Chtimes(filepath.Join(r.CacheDir, "results", name), old, old))
	}

	require.NoError(t, r.Del(context.Background(), n, att))
	assert.ElementsMatch(t, []string{".lo-c1-eth0.tmp-2747241752", ".lo-c2-eth0.tmp-2747241752", ".lo-c1-eth0.tmp-1.tmp-2", ".lo-c1-eth0.tmp-x"}, cacheFiles(t, r.CacheDir))
	assert.Equal(t, []string{"lo-c2-eth0"}, tmpFiles(t, r.CacheDir))

	require.NoError(t, r.GC(context.Background(), n, nil))
	assert.ElementsMatch(t, []string{".lo-c1-eth0.tmp-x"}, cacheFiles(t, r.CacheDir), "only what no write of ours leaves stays")
	assert.Empty(t, tmpFiles(t, r.CacheDir))
}

func TestGCLeavesARecentFormerStyleTemporaryFile(t *testing.T) {
	r := newRunner(t, t.TempDir())
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	name := ".lo-c1-eth0.tmp-12345"
	writeFile(t, filepath.Join(r.CacheDir, "results", name), "{")
	require.NoError(t, r.GC(context.Background(), n, nil))
	assert.Equal(t, []string{name}, cacheFiles(t, r.CacheDir), "a former binary may be writing it right now")
}

// TestGCDoesNotRemoveTheFileOfAWriterAtWork stops one ADD between writing its cache
// entry and renaming it into place while GC runs.
func TestGCDoesNotRemoveTheFileOfAWriterAtWork(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	r := newRunner(t, t.TempDir())
	var gcLog strings.Builder
	r.Stderr = &syncWriter{w: &gcLog}
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	written, resume := make(chan struct{}), make(chan struct{})
	chain.SetCacheWritten(r, func() { close(written); <-resume })
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	var addErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, addErr = r.Add(context.Background(), n, att)
	}()
	<-written
	other := parse(t, `{"cniVersion":"1.1.0","name":"other","plugins":[{"type":"loopback"}]}`)
	require.NoError(t, r.GC(context.Background(), other, nil))
	assert.Equal(t, []string{"lo-c1-eth0"}, tmpFiles(t, r.CacheDir), "the writer's file is still there")
	assert.Contains(t, gcLog.String(), "stay until the next GC: cache writers still at work")
	close(resume)
	<-done
	require.NoError(t, addErr)
	assert.Equal(t, []string{"lo-c1-eth0"}, cacheFiles(t, r.CacheDir))
	assert.Empty(t, tmpFiles(t, r.CacheDir), "the resumed writer renamed its file into place")
	require.NoError(t, r.Del(context.Background(), n, att))
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// killedWriterEnv makes the test binary, run again as a child, ADD and kill itself
// with SIGKILL once its cache entry is written but not yet renamed into place.
const killedWriterEnv = "CNI_TEST_KILLED_WRITER"

// TestKilledWriterChild is the child's side of TestRunnerKilledWhileWritingItsCache.
func TestKilledWriterChild(t *testing.T) {
	spec := os.Getenv(killedWriterEnv)
	if spec == "" {
		t.Skip("only run as the child of TestRunnerKilledWhileWritingItsCache")
	}
	cacheDir, netns, _ := strings.Cut(spec, "\n")
	r := newRunner(t, t.TempDir())
	r.CacheDir = cacheDir
	chain.SetCacheWritten(r, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: netns, IfName: "eth0"})
	t.Fatalf("ADD returned (%v): the hook did not kill the process", err)
}

func TestRunnerKilledWhileWritingItsCacheLeavesNothingAfterDelOrGC(t *testing.T) {
	testns.RequireRoot(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	for _, next := range []string{"DEL", "GC"} {
		t.Run(next, func(t *testing.T) {
			host, ctr := testns.New(t), testns.New(t)
			r := newRunner(t, t.TempDir())
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterChild$", "-test.count=1")
			// The child dies by SIGKILL, before its t.TempDir cleanup: its temp dirs go
			// with this test's.
			cmd.Env = append(os.Environ(), killedWriterEnv+"="+r.CacheDir+"\n"+ctr.Path, "TMPDIR="+t.TempDir())
			var err error
			var out []byte
			host.Run(t, func() error { out, err = cmd.CombinedOutput(); return nil })
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, "signal: killed", ee.ProcessState.String(), "%s", out)
			require.True(t, loUp(t, ctr), "the killed ADD had run its plugins")
			require.Equal(t, []string{"lo-c1-eth0"}, tmpFiles(t, r.CacheDir), "the crash left its temporary file")
			require.Empty(t, cacheFiles(t, r.CacheDir))

			host.Run(t, func() error {
				if next == "DEL" {
					return r.Del(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
				}
				return r.GC(context.Background(), n, nil)
			})
			assert.Empty(t, tmpFiles(t, r.CacheDir))
			assert.Empty(t, cacheFiles(t, r.CacheDir))
		})
	}
}

// ownNetns is a runner in host with a chain of loopback and a recorder (writing to
// rec), and a cache entry for container c1 whose netns is host itself: what a
// /proc/<pid>/ns/net path becomes once its process is gone and the pid belongs to a
// process of the host.
type ownNetns struct {
	host *testns.NS
	rec  string
	r    *chain.Runner
	n    *chain.Network
	att  chain.Attachment
}

func newOwnNetns(t *testing.T) ownNetns {
	testns.RequireRoot(t)
	o := ownNetns{host: testns.NewWithLoopback(t), rec: filepath.Join(t.TempDir(), "rec"), r: newRunner(t, pluginDir(t))}
	o.n = parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"loopback"},`+recorderConf(o.rec)+`]}`)
	ctr := testns.New(t)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	o.host.Run(t, func() error { _, err := o.r.Add(context.Background(), o.n, att); return err })
	path := filepath.Join(o.r.CacheDir, "results", o.n.Name+"-c1-eth0")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), ctr.Path, o.host.Path)), 0o600))
	o.att = att
	o.att.Netns = o.host.Path
	return o
}

func TestGCDropsAnEntryWhoseNetnsIsTheRunnersOwn(t *testing.T) {
	o := newOwnNetns(t)
	host, rec, r, n := o.host, o.rec, o.r, o.n

	for i := 0; i < 2; i++ {
		host.Run(t, func() error { return r.GC(context.Background(), n, nil) })
		assert.Empty(t, cacheFiles(t, r.CacheDir))
	}
	recs := readRecords(t, rec)
	require.Len(t, recs, 4, "ADD, DEL of the stale entry, GC, GC")
	assert.Equal(t, "DEL", recs[1].Command)
	assert.Equal(t, "", recs[1].Env["CNI_NETNS"], "deleted as for a netns that is gone")
	assert.Equal(t, "c1", recs[1].Env["CNI_CONTAINERID"])
	assert.Contains(t, recs[1].conf(t), "prevResult")
	assert.True(t, loUp(t, host), "nothing was done in the runner's own namespace")
}

func TestDelOfAnAttachmentWhoseNetnsIsTheRunnersOwn(t *testing.T) {
	o := newOwnNetns(t)
	host, rec, r, n, att := o.host, o.rec, o.r, o.n, o.att

	host.Run(t, func() error { return r.Del(context.Background(), n, att) })
	assert.Empty(t, cacheFiles(t, r.CacheDir))
	assert.Equal(t, "", readRecords(t, rec)[1].Env["CNI_NETNS"])
	assert.True(t, loUp(t, host))

	// CNI_NETNS_OVERRIDE=1 asks to act on the runner's own namespace: the plugins get
	// it, and loopback (which honours the override) takes lo down.
	r.Env = append(os.Environ(), "CNI_NETNS_OVERRIDE=1")
	host.Run(t, func() error { return r.Del(context.Background(), n, att) })
	assert.Equal(t, host.Path, readRecords(t, rec)[2].Env["CNI_NETNS"])
	assert.False(t, loUp(t, host))
}

// TestGCDeletesAStaleAttachmentThatAddHereWouldRefuse: libcni takes an interface name
// with a control character, so a libcni runtime may have cached "e\x7f". GC runs its DEL
// and removes the entry (it used to drop the entry without DEL, leaking what the
// plugins held).
func TestGCDeletesAStaleAttachmentThatAddHereWouldRefuse(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	writeFile(t, filepath.Join(r.CacheDir, "results", "n-c1-e\x7f"),
		`{"kind":"cniCacheV1","containerId":"c1","ifName":"e\u007f","networkName":"n","result":{"cniVersion":"1.1.0"}}`)

	require.NoError(t, r.GC(context.Background(), n, nil))
	recs := readRecords(t, rec)
	require.Len(t, recs, 2, "DEL of the stale attachment, then the plugin's GC")
	assert.Equal(t, "DEL", recs[0].Command)
	assert.Equal(t, "e\x7f", recs[0].Env["CNI_IFNAME"])
	assert.Equal(t, "GC", recs[1].Command)
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

// TestOddEntriesInTheCacheAreNeitherFollowedNorFatal plants, in results/, what no
// runtime writes there: a symlink to a valid entry outside the cache (its attachment
// must not be deleted), a FIFO (nothing may wait on it), a directory, an oversized
// entry, an entry naming an invalid attachment, a symlink in place of the temporary
// directory. GC succeeds, twice, and ADD, CHECK and DEL still work beside them.
func TestOddEntriesInTheCacheAreNeitherFollowedNorFatal(t *testing.T) {
	testns.RequireRoot(t)
	host, victim, ctr := testns.New(t), testns.New(t), testns.New(t)
	r := newRunner(t, t.TempDir())
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	results := filepath.Join(r.CacheDir, "results")

	// A real entry, moved outside the cache and linked back.
	outside := t.TempDir()
	victimAtt := chain.Attachment{ContainerID: "victim", Netns: victim.Path, IfName: "eth0"}
	host.Run(t, func() error { _, err := r.Add(context.Background(), n, victimAtt); return err })
	require.NoError(t, os.Rename(filepath.Join(results, "lo-victim-eth0"), filepath.Join(outside, "entry")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "entry"), filepath.Join(results, "lo-victim-eth0")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(results, "lo-fifo-eth0"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(results, "lo-dir-eth0"), 0o700))
	writeFile(t, filepath.Join(results, "lo-big-eth0"), `{"kind":"cniCacheV1","containerId":"big","ifName":"eth0","networkName":"lo","pad":"`+
		strings.Repeat("x", chain.MaxFileSize)+`"}`)
	writeFile(t, filepath.Join(results, "lo-bad-eth0"), `{"kind":"cniCacheV1","containerId":"../bad","ifName":"eth0","networkName":"lo"}`)
	writeFile(t, filepath.Join(outside, "keep"), "not the runner's")
	require.NoError(t, os.Remove(filepath.Join(r.CacheDir, "results.tmp")))
	require.NoError(t, os.Symlink(outside, filepath.Join(r.CacheDir, "results.tmp")))

	within(t, time.Minute, func() {
		for i := 0; i < 2; i++ {
			host.Run(t, func() error { return r.GC(context.Background(), n, nil) })
		}
	})
	assert.True(t, loUp(t, victim), "the entry behind the symlink was not acted on")
	assert.FileExists(t, filepath.Join(outside, "keep"))
	assert.FileExists(t, filepath.Join(outside, "entry"))
	assert.ElementsMatch(t, []string{"lo-victim-eth0", "lo-fifo-eth0", "lo-dir-eth0", "lo-big-eth0"}, cacheFiles(t, r.CacheDir),
		"the invalid entry is dropped, the rest skipped")

	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	host.Run(t, func() error {
		if _, err := r.Add(context.Background(), n, att); err != nil {
			return err
		}
		if err := r.Check(context.Background(), n, att); err != nil {
			return err
		}
		return r.Del(context.Background(), n, att)
	})
	assert.FileExists(t, filepath.Join(outside, "keep"), "ADD replaced the planted symlink, writing nothing through it")
	assert.Empty(t, tmpFiles(t, r.CacheDir))
	assert.ElementsMatch(t, []string{"lo-victim-eth0", "lo-fifo-eth0", "lo-dir-eth0", "lo-big-eth0"}, cacheFiles(t, r.CacheDir),
		"DEL removed c1's entry and only that")
}

// TestUnusableEntryOfTheAttachmentIsNotFollowed: CHECK says what is wrong with the
// attachment's own entry, DEL runs without it and removes it (a symlink itself, never
// its target).
func TestUnusableEntryOfTheAttachmentIsNotFollowed(t *testing.T) {
	testns.RequireRoot(t)
	outside := filepath.Join(t.TempDir(), "entry")
	cases := map[string]struct {
		plant func(t *testing.T, path string)
		msg   string
	}{
		"symlink": {func(t *testing.T, path string) {
			writeFile(t, outside, `{"cniVersion":"1.1.0"}`)
			require.NoError(t, os.Symlink(outside, path))
		}, "is a symlink"},
		"fifo":      {func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }, "is not a regular file"},
		"oversized": {func(t *testing.T, path string) { writeFile(t, path, strings.Repeat(" ", chain.MaxFileSize+1)) }, "is larger than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctr, rec, r := recordingRunner(t)
			n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
			att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
			require.NoError(t, os.MkdirAll(filepath.Join(r.CacheDir, "results"), 0o700))
			tc.plant(t, filepath.Join(r.CacheDir, "results", "n-c1-eth0"))

			within(t, time.Minute, func() {
				require.ErrorContains(t, r.Check(context.Background(), n, att), tc.msg)
				require.NoError(t, r.Del(context.Background(), n, att))
			})
			recs := readRecords(t, rec)
			require.Len(t, recs, 1)
			assert.NotContains(t, recs[0].conf(t), "prevResult")
			assert.Empty(t, cacheFiles(t, r.CacheDir))
		})
	}
	assert.FileExists(t, outside)
}

// within runs fn and fails the test when it has not returned after d (it would hang
// on a FIFO, say); fn's own failures stop it as usual.
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
	}
}
