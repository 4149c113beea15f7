package inproc_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// observed is what one libcni run of the standard chain leaves.
type observed struct {
	result, ctrAfterAdd, hostAfterAdd, ctrAfterDel, hostAfterDel string
	cacheLeft                                                    []string
}

// observe runs ADD, CHECK and DEL of the standard chain through libcni with exec, in
// fresh namespaces, and records what it sees.
func observe(t *testing.T, exec invoke.Exec, dir string) observed {
	host, ctr := testns.New(t), testns.New(t)
	cacheDir := t.TempDir()
	c := newClient(t, host, exec, dir, cacheDir, standardChain(filepath.Join(t.TempDir(), "ipam")))
	rt := runtimeConf("c1", ctr)
	ip := func(n *testns.NS, args ...string) string {
		out, err := n.Exec(t, "ip", args...)
		require.NoError(t, err, out)
		return volatile.ReplaceAllString(out, "X")
	}
	var o observed
	res, err := c.add(rt)
	require.NoError(t, err)
	o.result = volatile.ReplaceAllString(strings.ReplaceAll(res, ctr.Path, "NETNS"), "X")
	require.NoError(t, c.check(rt))
	o.ctrAfterAdd = ip(ctr, "-br", "-4", "addr") + ip(ctr, "route")
	o.hostAfterAdd = ip(host, "-br", "-o", "link", "show", "type", "veth") + ip(host, "route")
	require.NoError(t, c.del(rt))
	o.ctrAfterDel = ip(ctr, "-br", "link")
	o.hostAfterDel = ip(host, "-br", "link", "show", "type", "veth")
	o.cacheLeft = entries(t, filepath.Join(cacheDir, "results"))
	return o
}

// TestLibcniWithExecRunsTheStandardChainAsWithItsBinaries: libcni with our Exec plugged
// in (no plugin binary on its path) gives the same result, container and host state and
// cache as libcni exec'ing the cni binary under the plugins' names.
func TestLibcniWithExecRunsTheStandardChainAsWithItsBinaries(t *testing.T) {
	testns.RequireRoot(t)
	execd := observe(t, nil, pluginDir(t, stdPlugins...))
	inProcess := observe(t, &inproc.Exec{}, pluginDir(t))
	assert.Contains(t, inProcess.result, `"address":"10.78.0.2/16"`)
	assert.Contains(t, inProcess.ctrAfterAdd, "default via 10.78.0.1")
	assert.Empty(t, inProcess.hostAfterDel, "a veth is left on the host")
	assert.Empty(t, inProcess.cacheLeft)
	assert.Equal(t, execd, inProcess)
}

// TestLibcniWithExecMixesBuiltinsWithAThirdPartyPlugin: a list that ends in a plugin
// the toolkit does not hold runs it exec'd from libcni's path, with the built-ins'
// result as its prevResult, for ADD, CHECK and DEL.
func TestLibcniWithExecMixesBuiltinsWithAThirdPartyPlugin(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr := testns.New(t), testns.New(t)
	dir, rec := pluginDir(t), filepath.Join(t.TempDir(), "rec")
	c := newClient(t, host, &inproc.Exec{}, dir, t.TempDir(), standardChain(filepath.Join(t.TempDir(), "ipam"), recorderConf(rec)))
	rt := runtimeConf("mixed", ctr)
	res, err := c.add(rt)
	require.NoError(t, err)
	assert.Contains(t, res, `"name":"rec-eth0"`)
	assert.Contains(t, res, `"address":"10.78.0.2/16"`)
	require.NoError(t, c.check(rt))
	require.NoError(t, c.del(rt))

	records := plugintest.Records[struct {
		Command string            `json:"command"`
		Env     map[string]string `json:"env"`
		Stdin   string            `json:"stdin"`
	}](t, rec)
	require.Len(t, records, 3)
	for i, cmd := range []string{"ADD", "CHECK", "DEL"} {
		assert.Equal(t, cmd, records[i].Command)
		assert.Equal(t, dir, records[i].Env["CNI_PATH"])
		assert.Contains(t, records[i].Stdin, `"10.78.0.2/16"`, "%s: the built-ins' result is not its prevResult", cmd)
	}
}

// side is one runtime of the cache interop test.
type side struct {
	add, check, del func(rt *libcni.RuntimeConf) error
}

func sides(t *testing.T, host *testns.NS, dir, cacheDir, conf string) map[string]side {
	of := func(c *client) side {
		return side{
			add:   func(rt *libcni.RuntimeConf) error { _, err := c.add(rt); return err },
			check: c.check, del: c.del,
		}
	}
	n, err := inproc.Parse([]byte(conf))
	require.NoError(t, err)
	r := &inproc.Runner{PluginPath: []string{dir}, CacheDir: cacheDir}
	in := func(op func(ctx context.Context, att inproc.Attachment) error) func(rt *libcni.RuntimeConf) error {
		return func(rt *libcni.RuntimeConf) error {
			var err error
			host.Run(t, func() error { err = op(context.Background(), attachment(rt)); return nil })
			return err
		}
	}
	return map[string]side{
		"libcni exec'ing":  of(newClient(t, host, nil, dir, cacheDir, conf)),
		"libcni with Exec": of(newClient(t, host, &inproc.Exec{}, dir, cacheDir, conf)),
		"Runner": {
			add:   in(func(ctx context.Context, att inproc.Attachment) error { _, err := r.Add(ctx, n, att); return err }),
			check: in(func(ctx context.Context, att inproc.Attachment) error { return r.Check(ctx, n, att) }),
			del:   in(func(ctx context.Context, att inproc.Attachment) error { return r.Del(ctx, n, att) }),
		},
	}
}

// TestResultCacheIsSharedWithAnExecBasedLibcni: what libcni with our Exec or our Runner
// ADDs, a libcni exec'ing the plugins reads back from its cache, CHECKs and DELs, and the
// other way round; nothing is left on the host, in the cache or in IPAM.
func TestResultCacheIsSharedWithAnExecBasedLibcni(t *testing.T) {
	testns.RequireRoot(t)
	for _, pair := range [][2]string{
		{"libcni with Exec", "libcni exec'ing"}, {"libcni exec'ing", "libcni with Exec"},
		{"Runner", "libcni exec'ing"}, {"libcni exec'ing", "Runner"},
	} {
		t.Run(pair[0]+" then "+pair[1], func(t *testing.T) {
			host, ctr := testns.New(t), testns.New(t)
			dir, cacheDir, ipamDir := pluginDir(t, stdPlugins...), t.TempDir(), filepath.Join(t.TempDir(), "ipam")
			conf := standardChain(ipamDir)
			all := sides(t, host, dir, cacheDir, conf)
			writer, reader := all[pair[0]], all[pair[1]]
			rt := runtimeConf("shared", ctr)
			require.NoError(t, writer.add(rt))
			cached := newClient(t, host, nil, dir, cacheDir, conf).cached(rt)
			assert.Contains(t, cached, `"address":"10.78.0.2/16"`)
			require.NoError(t, reader.check(rt))
			require.NoError(t, reader.del(rt))
			assert.Empty(t, entries(t, filepath.Join(cacheDir, "results")))
			out, err := host.Exec(t, "ip", "-br", "link", "show", "type", "veth")
			require.NoError(t, err, out)
			assert.Empty(t, out, "a veth is left on the host")
			assert.NotContains(t, entries(t, filepath.Join(ipamDir, "emb")), "10.78.0.2", "the address is still reserved")
		})
	}
}
