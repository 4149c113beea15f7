package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// standardChain is the chain `make demo` runs: bridge with host-local and masquerade,
// portmap and bandwidth, with the nftables backends.
func standardChain(dataDir string) string { return standardChainOn(dataDir, "nftables") }

// standardChainOn is the standard chain with masquerade and port mappings in backend.
func standardChainOn(dataDir, backend string) string {
	return `{"cniVersion":"1.1.0","name":"std","plugins":[` +
		`{"type":"bridge","bridge":"cni-std0","isGateway":true,"ipMasq":true,"ipMasqBackend":"` + backend + `",` +
		`"ipam":{"type":"host-local","dataDir":"` + dataDir + `","ranges":[[{"subnet":"10.77.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},` +
		`{"type":"portmap","backend":"` + backend + `","capabilities":{"portMappings":true}},` +
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
}

const standardCaps = `{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],` +
	`"bandwidth":{"ingressRate":10000000,"ingressBurst":1000000,"egressRate":10000000,"egressBurst":1000000}}`

// capsWithPort is standardCaps mapping another host port.
func capsWithPort(port int) string {
	return strings.Replace(standardCaps, "8080", strconv.Itoa(port), 1)
}

// cacheState is what the cache holds: entries, then temporary files.
func (e *env) cacheState(t *testing.T) ([]string, []string) {
	return pt.Entries(t, filepath.Join(e.cacheDir, "results")), pt.Entries(t, filepath.Join(e.cacheDir, "results.tmp"))
}

// reservations lists the addresses host-local holds for network std.
func reservations(t *testing.T, dataDir string) []string {
	return pt.Reservations(t, filepath.Join(dataDir, "std"))
}

// ruleset is the host's nf_tables ruleset read over netlink and, where the firewall
// binaries are, iptables-save's tables: nft does not show the comments of rules
// iptables-nft made, and legacy tables are not in nf_tables at all.
func (e *env) ruleset(t *testing.T) string {
	return nfttest.Firewall(t, e.host)
}

// TestLongContainerIDThroughTheStandardChain: an id of 240 bytes, and the longest whose
// cache entry name fits in 255 bytes (libcni's limit as well), go through add, check
// and del of the exec'd binary; one byte more is refused before any plugin runs.
func TestLongContainerIDThroughTheStandardChain(t *testing.T) {
	for _, c := range []struct {
		n       int
		backend string
	}{{240, "nftables"}, {255 - len("std--eth0"), "nftables"}, {240, "iptables"}, {255 - len("std--eth0"), "iptables"}} {
		n := c.n
		t.Run(fmt.Sprintf("%d/%s", n, c.backend), func(t *testing.T) {
			if c.backend == "iptables" {
				testns.RequireFirewallBinaries(t, "the iptables backend's comments are what it checks")
			}
			e := newEnv(t)
			dataDir := t.TempDir()
			e.conf(t, "10-std.conflist", standardChainOn(dataDir, c.backend))
			ctr := testns.New(t)
			id := pt.LongID(n)

			r := e.cni(t, "", "add", "std", ctr.Path, "--container-id", id, "--cap-args", standardCaps)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, `"address": "10.77.0.2/24"`)
			entries, tmp := e.cacheState(t)
			assert.Equal(t, []string{"std-" + id + "-eth0"}, entries)
			assert.Empty(t, tmp)
			assert.Equal(t, []string{"10.77.0.2"}, reservations(t, dataDir))
			// Comments name so long an id by its hash (package owner).
			assert.Contains(t, e.ruleset(t), owner.Hashed(id), "the port mapping is the container's")

			r = e.cni(t, "", "check", "std", ctr.Path, "--container-id", id, "--cap-args", standardCaps)
			assert.Equal(t, 0, r.code, r.stderr)
			r = e.cni(t, "", "del", "std", ctr.Path, "--container-id", id, "--cap-args", standardCaps)
			assert.Equal(t, run{}, r)
			entries, tmp = e.cacheState(t)
			assert.Empty(t, entries)
			assert.Empty(t, tmp)
			assert.Empty(t, reservations(t, dataDir))
			assert.NotContains(t, e.ruleset(t), owner.Hashed(id))
		})
	}
	t.Run("one byte too long", func(t *testing.T) {
		e := newEnv(t)
		dataDir := t.TempDir()
		e.conf(t, "10-std.conflist", standardChain(dataDir))
		ctr := testns.New(t)
		r := e.cni(t, "", "add", "std", ctr.Path, "--container-id", pt.LongID(256-len("std--eth0")), "--cap-args", standardCaps)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "would be 256 bytes, the limit is 255 (CNI error code 4)")
		_, err := e.host.Handle(t).LinkByName("cni-std0")
		assert.Error(t, err, "no plugin ran")
		assert.Empty(t, reservations(t, dataDir))
		entries, tmp := e.cacheState(t)
		assert.Empty(t, entries)
		assert.Empty(t, tmp)
	})
}

// TestStandardChainAsOneChainPluginThroughTheBinary: `cni add|check|del` run a
// network written as one chain plugin (every child in-process) and leave nothing.
func TestStandardChainAsOneChainPluginThroughTheBinary(t *testing.T) {
	e := newEnv(t)
	dataDir := t.TempDir()
	var children struct{ Plugins []json.RawMessage }
	require.NoError(t, json.Unmarshal([]byte(standardChain(dataDir)), &children))
	var list []string
	for _, c := range children.Plugins {
		list = append(list, string(c))
	}
	e.conf(t, "10-std.conflist", `{"cniVersion":"1.1.0","name":"std","plugins":[{"type":"chain",`+
		`"capabilities":{"portMappings":true,"bandwidth":true},"plugins":[`+strings.Join(list, ",")+`]}]}`)
	ctr := testns.New(t)

	r := e.cni(t, "", "add", "std", ctr.Path, "--cap-args", standardCaps)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"address": "10.77.0.2/24"`)
	assert.Contains(t, r.stdout, `"name": "bwp`, "bandwidth's ifb")
	assert.Equal(t, []string{"10.77.0.2"}, reservations(t, dataDir))
	r = e.cni(t, "", "check", "std", ctr.Path, "--cap-args", standardCaps)
	assert.Equal(t, run{}, r)
	r = e.cni(t, "", "del", "std", ctr.Path, "--cap-args", standardCaps)
	assert.Equal(t, run{}, r)
	entries, tmp := e.cacheState(t)
	assert.Empty(t, entries)
	assert.Empty(t, tmp)
	assert.Empty(t, reservations(t, dataDir))
	assert.NotContains(t, e.ruleset(t), "10.77.0.2")
	for _, l := range pt.LinkList(t, e.host) {
		assert.NotContains(t, []string{"veth", "ifb"}, l.Type(), "link %s left", l.Attrs().Name)
	}
}

// plantLeftovers leaves what an interrupted write of entry name leaves: this runner's
// temporary file, and the former writer's ".<name>.tmp-<digits>", an hour old.
func (e *env) plantLeftovers(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(e.cacheDir, "results.tmp"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(e.cacheDir, "results.tmp", name), []byte(`{"kind":"cniCa`), 0o600))
	legacy := filepath.Join(e.cacheDir, "results", "."+name+".tmp-2747241752")
	require.NoError(t, os.WriteFile(legacy, []byte(`{"kind":"cniCacheV1"}`), 0o600))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(legacy, old, old))
}

// TestLeftoversOfAnInterruptedCacheWriteGoAtDelOrGC: DEL removes the entry's own
// temporary file; a former writer's ".<name>.tmp-N" is GC's to sweep, since DEL lists no
// directory (that made every DEL read every cache name).
func TestLeftoversOfAnInterruptedCacheWriteGoAtDelOrGC(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)
	require.Equal(t, 0, e.cni(t, "", "add", "lo", ctr.Path, "--container-id", "c1").code)
	e.plantLeftovers(t, "lo-c1-eth0")
	e.plantLeftovers(t, "lo-c2-eth0")

	assert.Equal(t, run{}, e.cni(t, "", "del", "lo", ctr.Path, "--container-id", "c1"))
	entries, tmp := e.cacheState(t)
	assert.Equal(t, []string{".lo-c1-eth0.tmp-2747241752", ".lo-c2-eth0.tmp-2747241752"}, entries,
		"the former writer's leftovers wait for GC")
	assert.Equal(t, []string{"lo-c2-eth0"}, tmp, "c1's own temporary file went with its DEL")

	assert.Equal(t, run{}, e.cni(t, "", "gc", "lo"))
	entries, tmp = e.cacheState(t)
	assert.Empty(t, entries)
	assert.Empty(t, tmp)
}

// hostEntry points the cache entry of container id at the namespace the binary runs in,
// as a /proc/<pid>/ns/net path does once its pid belongs to a process of the host.
func (e *env) hostEntry(t *testing.T, id string) {
	path := filepath.Join(e.cacheDir, "results", "std-"+id+"-eth0")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var netns string
	for _, field := range strings.Split(string(data), ",") {
		if v, ok := strings.CutPrefix(field, `"netns":`); ok {
			netns = strings.Trim(v, `"`)
		}
	}
	require.NotEmpty(t, netns)
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), netns, e.host.Path)), 0o600))
}

// TestCacheEntryNamingTheHostsNetnsIsDeletedAndCollected: GC of such an entry finishes
// and drops it, and DEL of it finishes, both releasing what the plugins hold on the
// host (addresses, rules) without acting in the host's namespace.
func TestCacheEntryNamingTheHostsNetnsIsDeletedAndCollected(t *testing.T) {
	e := newEnv(t)
	dataDir := t.TempDir()
	e.conf(t, "10-std.conflist", standardChain(dataDir))
	for i, id := range []string{"c1", "c2"} {
		ctr := testns.New(t)
		r := e.cni(t, "", "add", "std", ctr.Path, "--container-id", id, "--cap-args", capsWithPort(8080+i))
		require.Equal(t, 0, r.code, r.stderr)
		e.hostEntry(t, id)
		ctr.Close() // the container is gone
	}
	require.Len(t, reservations(t, dataDir), 2)
	assert.ElementsMatch(t, []string{"lo", "cni-std0", "bwp", "bwp"}, e.links(t), "the bandwidth plugin's ifb devices")

	r := e.cni(t, "", "del", "std", e.host.Path, "--container-id", "c1")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "is this runner's own network namespace")
	assert.Equal(t, []string{"std-c2-eth0"}, pt.Entries(t, filepath.Join(e.cacheDir, "results")))
	assert.Len(t, reservations(t, dataDir), 1)

	for i := 0; i < 2; i++ {
		r = e.cni(t, "", "gc", "std")
		assert.Equal(t, 0, r.code, r.stderr)
	}
	assert.Empty(t, pt.Entries(t, filepath.Join(e.cacheDir, "results")))
	assert.Empty(t, reservations(t, dataDir))
	rules := e.ruleset(t)
	for _, id := range []string{"c1", "c2"} {
		assert.NotContains(t, rules, `id: "`+id+`"`, "iptables comments")
		assert.NotContains(t, rules, `id=`+id+`"`, "nftables comments")
	}
	assert.ElementsMatch(t, []string{"lo", "cni-std0"}, e.links(t), "the ifb devices are gone, nothing else was touched")
}

// links lists the host's links, ifb devices as "bwp", without the veths of containers
// that are gone (the kernel removes them when it frees their namespace, in its time).
func (e *env) links(t *testing.T) []string {
	var out []string
	for _, name := range pt.Links(t, e.host) {
		if strings.HasPrefix(name, "veth") {
			continue
		}
		if strings.HasPrefix(name, "bwp") {
			name = "bwp"
		}
		out = append(out, name)
	}
	return out
}

// TestGCOfOddCacheEntriesNeverFailsNorFollows plants what no runtime writes in
// results/: a symlink to a valid entry outside the cache, a FIFO, a directory, an
// oversized file, an entry naming an invalid attachment; and a symlink in place of the
// temporary directory. gc exits 0, twice, without waiting on the FIFO or acting on the
// entry behind the symlink, and add/del still work.
func TestGCOfOddCacheEntriesNeverFailsNorFollows(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	victim, ctr := testns.New(t), testns.New(t)
	results := filepath.Join(e.cacheDir, "results")
	outside := t.TempDir()
	require.Equal(t, 0, e.cni(t, "", "add", "lo", victim.Path, "--container-id", "victim").code)
	require.NoError(t, os.Rename(filepath.Join(results, "lo-victim-eth0"), filepath.Join(outside, "entry")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "entry"), filepath.Join(results, "lo-victim-eth0")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(results, "lo-fifo-eth0"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(results, "lo-dir-eth0"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(results, "lo-big-eth0"), []byte(`{"kind":"cniCacheV1","pad":"`+strings.Repeat("x", 3<<20)+`"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(results, "lo-bad-eth0"), []byte(`{"kind":"cniCacheV1","containerId":"a;b","ifName":"eth0","networkName":"lo"}`), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), nil, 0o600))
	require.NoError(t, os.RemoveAll(filepath.Join(e.cacheDir, "results.tmp")))
	require.NoError(t, os.Symlink(outside, filepath.Join(e.cacheDir, "results.tmp")))

	for i := 0; i < 2; i++ {
		r := e.cni(t, "", "gc", "lo")
		assert.Equal(t, 0, r.code, r.stderr)
	}
	assert.True(t, loUp(t, victim), "the entry behind the symlink was not acted on")
	assert.ElementsMatch(t, []string{"entry", "keep"}, pt.Entries(t, outside))
	assert.ElementsMatch(t, []string{"lo-victim-eth0", "lo-fifo-eth0", "lo-dir-eth0", "lo-big-eth0"}, pt.Entries(t, results))

	assert.Equal(t, 0, e.cni(t, "", "add", "lo", ctr.Path, "--container-id", "c1").code)
	assert.Equal(t, run{}, e.cni(t, "", "check", "lo", ctr.Path, "--container-id", "c1"))
	assert.Equal(t, run{}, e.cni(t, "", "del", "lo", ctr.Path, "--container-id", "c1"))
	assert.ElementsMatch(t, []string{"entry", "keep"}, pt.Entries(t, outside))
}

// TestAddSucceedsWhenAPluginsChildHoldsItsStdout: the plugin's exit status counts, not
// a child it left running with its stdout and stderr.
func TestAddSucceedsWhenAPluginsChildHoldsItsStdout(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := fmt.Sprintf("#!/bin/sh\ncat >/dev/null\nsleep 60 &\necho $! >%s\necho 'plugin: started a child' >&2\n"+
		`echo '{"cniVersion":"1.1.0","interfaces":[{"name":"daemon0"}]}'`+"\n", pidFile)
	require.NoError(t, os.WriteFile(filepath.Join(e.pluginDir, "daemonizing"), []byte(script), 0o755))
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	e.conf(t, "10-d.conflist", `{"cniVersion":"1.1.0","name":"d","plugins":[{"type":"daemonizing"}]}`)
	ctr := testns.New(t)

	r := e.cni(t, "", "add", "d", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"name": "daemon0"`)
	assert.Equal(t, "plugin: started a child\n", r.stderr)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.NoError(t, syscall.Kill(pid, 0), "the child still runs")
}
