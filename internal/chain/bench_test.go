package chain_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/testbed/testns"
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

const loopbackChain = `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`

// bench is one benchmark's attachment, run inside a host namespace of its own by our
// runner or by libcni.
type bench struct {
	b    *testing.B
	host *testns.NS
	att  chain.Attachment
}

func newBench(b *testing.B, caps map[string]any) *bench {
	testns.RequireRoot(b)
	host, ctr := testns.New(b), testns.New(b)
	return &bench{b: b, host: host, att: chain.Attachment{ContainerID: "bench", Netns: ctr.Path, IfName: "eth0", CapabilityArgs: caps}}
}

// ops are ADD and DEL of the bench's attachment for conf.
type ops struct{ add, del func() error }

// runner is ops through our runner with plugin dir dir.
func (x *bench) runner(dir, conf string) ops {
	r, n := newRunner(x.b, dir), parse(x.b, conf)
	return ops{
		add: func() error { _, err := r.Add(context.Background(), n, x.att); return err },
		del: func() error { return r.Del(context.Background(), n, x.att) },
	}
}

// libcni is ops through libcni exec'ing the plugins of dir, for comparison.
func (x *bench) libcni(dir, conf string) ops {
	ref := newReference(x.b, dir, x.b.TempDir())
	return ops{
		add: func() error { _, err := ref.add(conf, x.att); return err },
		del: func() error { return ref.del(conf, x.att) },
	}
}

// loop runs steps in turn for each iteration inside the host namespace; untimed steps
// run with the timer stopped.
func (x *bench) loop(timed, untimed []func() error) {
	x.host.Run(x.b, func() error {
		for x.b.Loop() {
			if len(untimed) > 0 {
				x.b.StopTimer()
				for _, step := range untimed {
					if err := step(); err != nil {
						return err
					}
				}
				x.b.StartTimer()
			}
			for _, step := range timed {
				if err := step(); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// addDel times ADD and DEL of each iteration.
func (x *bench) addDel(o ops) { x.loop([]func() error{o.add, o.del}, nil) }

func BenchmarkRunnerLoopbackAdd(b *testing.B) {
	x := newBench(b, nil)
	x.loop([]func() error{x.runner(b.TempDir(), loopbackChain).add}, nil)
}

func BenchmarkRunnerLoopbackAddDel(b *testing.B) {
	x := newBench(b, nil)
	x.addDel(x.runner(b.TempDir(), loopbackChain))
}

// BenchmarkLibcniLoopbackAddDel is the same work through libcni exec'ing the binary,
// for comparison.
func BenchmarkLibcniLoopbackAddDel(b *testing.B) {
	x := newBench(b, nil)
	x.addDel(x.libcni(pluginDir(b, "loopback"), loopbackChain))
}

func BenchmarkRunnerStandardChainAddDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	x := newBench(b, standardCaps)
	x.addDel(x.runner(b.TempDir(), standardChain(filepath.Join(b.TempDir(), "ipam"))))
}

// BenchmarkRunnerStandardChainDel times DEL alone: the kernel's waits for the veth and
// the ifb, overlapped since background.Pending (link.NS.DeleteInBackground).
func BenchmarkRunnerStandardChainDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	x := newBench(b, standardCaps)
	o := x.runner(b.TempDir(), standardChain(filepath.Join(b.TempDir(), "ipam")))
	x.loop([]func() error{o.del}, []func() error{o.add})
}

func BenchmarkLibcniStandardChainAddDel(b *testing.B) {
	requireBuiltins(b, "bridge", "host-local", "portmap", "bandwidth")
	x := newBench(b, standardCaps)
	x.addDel(x.libcni(pluginDir(b, "bridge", "host-local", "portmap", "bandwidth"), standardChain(filepath.Join(b.TempDir(), "ipam"))))
}

// lingeringChildPlugin is a CNI_PATH dir whose plugin "daemonizing" leaves a child
// holding its stdout for a second after it exits.
func lingeringChildPlugin(b *testing.B) string {
	dir := b.TempDir()
	daemonizingPlugin(b, dir, filepath.Join(b.TempDir(), "pid"), `{"cniVersion":"1.1.0","interfaces":[{"name":"daemon0"}]}`, 0, 1)
	return dir
}

const daemonizingChain = `{"cniVersion":"1.1.0","name":"d","plugins":[{"type":"daemonizing"}]}`

// BenchmarkRunnerPluginWithLingeringChildAdd: the plugin's exit ends each call.
func BenchmarkRunnerPluginWithLingeringChildAdd(b *testing.B) {
	x := newBench(b, nil)
	x.loop([]func() error{x.runner(lingeringChildPlugin(b), daemonizingChain).add}, nil)
}

// BenchmarkLibcniPluginWithLingeringChildAdd: libcni waits for the child each time.
func BenchmarkLibcniPluginWithLingeringChildAdd(b *testing.B) {
	x := newBench(b, nil)
	x.loop([]func() error{x.libcni(lingeringChildPlugin(b), daemonizingChain).add}, nil)
}
