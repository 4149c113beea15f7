package upgradetest_test

import (
	"context"
	"net/netip"
	"os"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/spec/skel"
)

// runtime is a container runtime's CNI client, exec'ing plugins found in path (CNI_PATH)
// inside the node's host netns. ADD caches the result under the node's cache dir for the
// CHECK and DEL that follow; GC uses an empty cache, so that only the plugins' own GC
// acts (both clients DEL every cached attachment that is not valid before). The plugins
// are told the cache dir (CNI_CACHE_DIR), as they find a runtime's default one: portmap
// reads it to tell a gone pod from a live one.
type runtime interface {
	add(n *node, path []string, conf []byte, p *pod) error
	check(n *node, path []string, conf []byte, p *pod) error
	del(n *node, path []string, conf []byte, p *pod) error
	gc(n *node, path []string, conf []byte, valid ...*pod) error
}

// runtimes are the two clients the matrix runs under.
var runtimes = map[string]func(t *testing.T) runtime{
	"libcni": func(t *testing.T) runtime { return &libcniRuntime{cache: t.TempDir()} },
	"runner": func(t *testing.T) runtime { return &runnerRuntime{cache: t.TempDir()} },
}

// libcniRuntime is libcni, the library containerd, CRI-O and podman use.
type libcniRuntime struct{ cache string }

func (r *libcniRuntime) run(n *node, path []string, conf []byte, cache string,
	op func(context.Context, *libcni.CNIConfig, *libcni.NetworkConfigList) error) error {
	n.t.Helper()
	list, err := libcni.ConfListFromBytes(conf)
	require.NoError(n.t, err)
	cni := libcni.NewCNIConfigWithCacheDir(path, cache, cacheEnvExec{
		Exec:  &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}},
		cache: cache,
	})
	return n.host.Do(func() error { return op(context.Background(), cni, list) })
}

// cacheEnvExec is libcni's exec with CNI_CACHE_DIR in every plugin's environment.
type cacheEnvExec struct {
	invoke.Exec
	cache string
}

func (e cacheEnvExec) ExecPlugin(ctx context.Context, plugin string, stdin []byte, environ []string) ([]byte, error) {
	return e.Exec.ExecPlugin(ctx, plugin, stdin, append(environ, "CNI_CACHE_DIR="+e.cache))
}

func libcniRT(p *pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns.Path, IfName: p.ifName, CapabilityArgs: p.capabilityArgs()}
}

func (r *libcniRuntime) add(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList) error {
		res, err := cni.AddNetworkList(ctx, list, libcniRT(p))
		if err != nil {
			return err
		}
		r100, err := types100.GetResult(res)
		if err != nil {
			return err
		}
		for _, ip := range r100.IPs {
			a, _ := netip.AddrFromSlice(ip.Address.IP)
			p.ips = append(p.ips, a.Unmap())
		}
		return nil
	})
}

func (r *libcniRuntime) check(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList) error {
		return cni.CheckNetworkList(ctx, list, libcniRT(p))
	})
}

func (r *libcniRuntime) del(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList) error {
		return cni.DelNetworkList(ctx, list, libcniRT(p))
	})
}

func (r *libcniRuntime) gc(n *node, path []string, conf []byte, valid ...*pod) error {
	args := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{}}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.id, IfName: p.ifName})
	}
	return r.run(n, path, conf, n.t.TempDir(), func(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList) error {
		return cni.GCNetworkList(ctx, list, args)
	})
}

// runnerRuntime is this module's chain runner (what `cni` as cnitool runs), with no
// built-in plugins: every plugin is exec'd.
type runnerRuntime struct{ cache string }

func (r *runnerRuntime) run(n *node, path []string, conf []byte, cache string,
	op func(context.Context, *chain.Runner, *chain.Network) error) error {
	n.t.Helper()
	nw, err := chain.Parse(conf)
	require.NoError(n.t, err)
	runner := &chain.Runner{PluginPath: path, CacheDir: cache, Stderr: os.Stderr, Env: append(os.Environ(), "CNI_CACHE_DIR="+cache)}
	return n.host.Do(func() error { return op(context.Background(), runner, nw) })
}

func runnerAtt(p *pod) chain.Attachment {
	return chain.Attachment{ContainerID: p.id, Netns: p.ns.Path, IfName: p.ifName, CapabilityArgs: p.capabilityArgs()}
}

func (r *runnerRuntime) add(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, runner *chain.Runner, nw *chain.Network) error {
		res, err := runner.Add(ctx, nw, runnerAtt(p))
		if err != nil {
			return err
		}
		for _, ip := range res.IPs {
			p.ips = append(p.ips, ip.Address.Addr().Unmap())
		}
		return nil
	})
}

func (r *runnerRuntime) check(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, runner *chain.Runner, nw *chain.Network) error {
		return runner.Check(ctx, nw, runnerAtt(p))
	})
}

func (r *runnerRuntime) del(n *node, path []string, conf []byte, p *pod) error {
	return r.run(n, path, conf, r.cache, func(ctx context.Context, runner *chain.Runner, nw *chain.Network) error {
		return runner.Del(ctx, nw, runnerAtt(p))
	})
}

func (r *runnerRuntime) gc(n *node, path []string, conf []byte, valid ...*pod) error {
	args := &chain.GCArgs{ValidAttachments: []skel.Attachment{}}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, skel.Attachment{ContainerID: p.id, IfName: p.ifName})
	}
	return r.run(n, path, conf, n.t.TempDir(), func(ctx context.Context, runner *chain.Runner, nw *chain.Network) error {
		return runner.GC(ctx, nw, args)
	})
}
