package chain_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/testns"
)

// StandardChain is the runtime-typical list: bridge with host-local and masquerade,
// portmap and bandwidth, storing IPAM state under dataDir.
func standardChain(dataDir string) string {
	return `{"cniVersion":"1.1.0","name":"std","plugins":[` +
		`{"type":"bridge","bridge":"cni-std0","isGateway":true,"ipMasq":true,` +
		`"ipam":{"type":"host-local","dataDir":"` + dataDir + `","ranges":[[{"subnet":"10.77.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},` +
		`{"type":"portmap","capabilities":{"portMappings":true}},` +
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
}

var standardCaps = map[string]any{
	"portMappings": []any{map[string]any{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
	"bandwidth":    map[string]any{"ingressRate": 10000000, "ingressBurst": 1000000, "egressRate": 10000000, "egressBurst": 1000000},
}

func benchAttachment(b *testing.B) (*testns.NS, chain.Attachment) {
	testns.RequireRoot(b)
	host, ctr := testns.New(b), testns.New(b)
	return host, chain.Attachment{ContainerID: "bench", Netns: ctr.Path, IfName: "eth0"}
}

func BenchmarkRunnerLoopbackAdd(b *testing.B) {
	host, att := benchAttachment(b)
	r := newRunner(b, b.TempDir())
	n := parse(b, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := r.Add(context.Background(), n, att); err != nil {
				return err
			}
		}
		return nil
	})
}

func BenchmarkRunnerLoopbackAddDel(b *testing.B) {
	host, att := benchAttachment(b)
	r := newRunner(b, b.TempDir())
	n := parse(b, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := r.Add(context.Background(), n, att); err != nil {
				return err
			}
			if err := r.Del(context.Background(), n, att); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkLibcniLoopbackAddDel is the same work through libcni exec'ing the binary,
// for comparison.
func BenchmarkLibcniLoopbackAddDel(b *testing.B) {
	host, att := benchAttachment(b)
	ref := newReference(b, pluginDir(b, "loopback"), b.TempDir())
	conf := `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := ref.add(conf, att); err != nil {
				return err
			}
			if err := ref.del(conf, att); err != nil {
				return err
			}
		}
		return nil
	})
}

func BenchmarkRunnerStandardChainAddDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	host, att := benchAttachment(b)
	att.CapabilityArgs = standardCaps
	r := newRunner(b, b.TempDir())
	n := parse(b, standardChain(filepath.Join(b.TempDir(), "ipam")))
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := r.Add(context.Background(), n, att); err != nil {
				return err
			}
			if err := r.Del(context.Background(), n, att); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkRunnerStandardChainDel times DEL alone: the kernel's waits for the veth and
// the ifb, overlapped since skel.Pending (link.DeleteInBackground).
func BenchmarkRunnerStandardChainDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	host, att := benchAttachment(b)
	att.CapabilityArgs = standardCaps
	r := newRunner(b, b.TempDir())
	n := parse(b, standardChain(filepath.Join(b.TempDir(), "ipam")))
	host.Run(b, func() error {
		for b.Loop() {
			b.StopTimer()
			if _, err := r.Add(context.Background(), n, att); err != nil {
				return err
			}
			b.StartTimer()
			if err := r.Del(context.Background(), n, att); err != nil {
				return err
			}
		}
		return nil
	})
}

func BenchmarkLibcniStandardChainAddDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	host, att := benchAttachment(b)
	att.CapabilityArgs = standardCaps
	ref := newReference(b, pluginDir(b, "bridge", "host-local", "portmap", "bandwidth"), b.TempDir())
	conf := standardChain(filepath.Join(b.TempDir(), "ipam"))
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := ref.add(conf, att); err != nil {
				return err
			}
			if err := ref.del(conf, att); err != nil {
				return err
			}
		}
		return nil
	})
}

// lingeringChildPlugin is a CNI_PATH dir whose plugin "daemonizing" leaves a child
// holding its stdout for a second after it exits.
func lingeringChildPlugin(b *testing.B) string {
	dir := b.TempDir()
	daemonizingPlugin(b, dir, filepath.Join(b.TempDir(), "pid"), `{"cniVersion":"1.1.0","interfaces":[{"name":"daemon0"}]}`, 0, 1)
	return dir
}

// BenchmarkRunnerPluginWithLingeringChildAdd: the plugin's exit ends each call.
func BenchmarkRunnerPluginWithLingeringChildAdd(b *testing.B) {
	host, att := benchAttachment(b)
	r := newRunner(b, lingeringChildPlugin(b))
	n := parse(b, `{"cniVersion":"1.1.0","name":"d","plugins":[{"type":"daemonizing"}]}`)
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := r.Add(context.Background(), n, att); err != nil {
				return err
			}
		}
		return nil
	})
}

// BenchmarkLibcniPluginWithLingeringChildAdd: libcni waits for the child each time.
func BenchmarkLibcniPluginWithLingeringChildAdd(b *testing.B) {
	host, att := benchAttachment(b)
	ref := newReference(b, lingeringChildPlugin(b), b.TempDir())
	conf := `{"cniVersion":"1.1.0","name":"d","plugins":[{"type":"daemonizing"}]}`
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := ref.add(conf, att); err != nil {
				return err
			}
		}
		return nil
	})
}
