package chain_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// volatile hides what differs on every ADD whoever runs it: MACs, veth and ifb names,
// interface indexes in "ip" output.
var volatile = regexp.MustCompile(`([0-9a-f]{2}:){5}[0-9a-f]{2}|veth[0-9a-f]{8}|bwp[0-9a-f]{12}|@if[0-9]+|fe80::[0-9a-f:]+/64`)

// observed is what one implementation leaves after ADD (+CHECK) and after DEL of the
// standard chain.
type observed struct {
	result, ctrAfterAdd, hostAfterAdd, ctrAfterDel, hostAfterDel string
	cacheLeft                                                    []string
}

// observeStandard runs ADD, CHECK and DEL of conf (given its IPAM dir) through the
// runtime rt makes for a cache dir, in fresh namespaces, and records what it sees.
func observeStandard(t *testing.T, conf func(ipamDir string) string, rt func(cacheDir string) runtime) observed {
	host, ctr := testns.New(t), testns.New(t)
	cacheDir := t.TempDir()
	r := rt(cacheDir)
	c := conf(filepath.Join(t.TempDir(), "ipam"))
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", CapabilityArgs: standardCaps}
	var o observed
	ip := func(n *testns.NS, args ...string) string {
		out, err := n.Exec(t, "ip", args...)
		require.NoError(t, err, out)
		return volatile.ReplaceAllString(out, "X")
	}
	host.Run(t, func() error {
		res, err := r.add(c, att)
		if err != nil {
			return err
		}
		o.result = volatile.ReplaceAllString(strings.ReplaceAll(res, ctr.Path, "NETNS"), "X")
		return r.check(c, att)
	})
	o.ctrAfterAdd = addrs(ip(ctr, "-br", "addr")) + ip(ctr, "route")
	o.hostAfterAdd = links(ip(host, "-br", "link")) + addrs(ip(host, "-br", "addr", "show", "cni-std0")) + ip(host, "route")
	host.Run(t, func() error { return r.del(c, att) })
	o.ctrAfterDel = addrs(ip(ctr, "-br", "addr"))
	o.hostAfterDel = links(ip(host, "-br", "link"))
	o.cacheLeft = cacheFiles(t, cacheDir)
	return o
}

func TestStandardChainGivesTheSameResultAndStateAsLibcni(t *testing.T) {
	testns.RequireRoot(t)
	requireBuiltins(t, "bridge", "host-local", "portmap", "bandwidth")
	dir := pluginDir(t, "bridge", "host-local", "portmap", "bandwidth")
	got := map[string]observed{}
	got["libcni"] = observeStandard(t, standardChain, func(cacheDir string) runtime { return newReference(t, dir, cacheDir) })
	got["ours"] = observeStandard(t, standardChain, func(cacheDir string) runtime {
		r := newRunner(t, dir)
		r.CacheDir = cacheDir
		return ours{t: t, r: r}
	})
	assert.Contains(t, got["ours"].result, `"address":"10.77.0.2/24"`)
	assert.Contains(t, got["ours"].ctrAfterAdd, "default via 10.77.0.1")
	assert.Equal(t, got["libcni"], got["ours"])
}

// TestWrappedStandardListRunsAsTheListDoes: libcni running the standard list as WrapList
// rewrites it (one chain plugin, one exec per operation) gives the same result, host and
// container state, and cache as libcni running the four plugins.
func TestWrappedStandardListRunsAsTheListDoes(t *testing.T) {
	testns.RequireRoot(t)
	requireBuiltins(t, "bridge", "host-local", "portmap", "bandwidth", "chain")
	dir := pluginDir(t, "bridge", "host-local", "portmap", "bandwidth", "chain")
	libcni := func(cacheDir string) runtime { return newReference(t, dir, cacheDir) }
	wrapped := func(ipamDir string) string {
		out, err := chain.WrapList([]byte(standardChain(ipamDir)), func(string) bool { return true })
		require.NoError(t, err)
		return string(out)
	}
	list, one := observeStandard(t, standardChain, libcni), observeStandard(t, wrapped, libcni)
	assert.Contains(t, one.result, `"address":"10.77.0.2/24"`)
	assert.Equal(t, list, one)
}

// links keeps the names and administrative flags of `ip -br link` lines: carrier and
// operational state follow a bridge's ports asynchronously in the kernel, so they differ
// from one run to the next whoever drove the chain.
func links(brief string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(brief), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			out = append(out, line)
			continue
		}
		var flags []string
		for _, fl := range strings.Split(strings.Trim(f[3], "<>"), ",") {
			if fl != "LOWER_UP" && fl != "NO-CARRIER" && fl != "M-DOWN" {
				flags = append(flags, fl)
			}
		}
		out = append(out, f[0]+" "+strings.Join(flags, ","))
	}
	return strings.Join(out, "\n") + "\n"
}

// addrs drops the operational state column of `ip -br addr` lines, for the same reason.
func addrs(brief string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(brief), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			f = append(f[:1], f[2:]...)
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, "\n") + "\n"
}
