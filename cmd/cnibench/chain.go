package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// standardChain is the chain Kubernetes runtimes ship: loopback, bridge with host-local
// and masquerade, portmap, bandwidth. backend "" means each plugin's default.
func standardChain(dataDir, backend string) []byte {
	be := ""
	pbe := ""
	if backend != "" {
		be = fmt.Sprintf(`,"ipMasqBackend":%q`, backend)
		pbe = fmt.Sprintf(`,"backend":%q`, backend)
	}
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"benchnet","plugins":[
		{"type":"loopback"},
		{"type":"bridge","bridge":"cnibench0","isGateway":true,"ipMasq":true%s,
		 "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.88.0.0/16"}]]}},
		{"type":"portmap","capabilities":{"portMappings":true},"snat":true%s},
		{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`, be, dataDir, pbe))
}

// asChainPlugin rewrites a conflist as one chain plugin holding its plugins, declaring
// the capabilities the standard chain uses: what a runtime then runs as one process.
func asChainPlugin(conf []byte) ([]byte, error) {
	var list map[string]any
	if err := json.Unmarshal(conf, &list); err != nil {
		return nil, err
	}
	list["plugins"] = []any{map[string]any{
		"type":         "chain",
		"capabilities": map[string]bool{"portMappings": true, "bandwidth": true},
		"plugins":      list["plugins"],
	}}
	return json.Marshal(list)
}

func capArgs(i int) map[string]any {
	return map[string]any{
		"portMappings": []map[string]any{{"hostPort": 20000 + i%40000, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 1_000_000_000, "ingressBurst": 10_000_000, "egressRate": 1_000_000_000, "egressBurst": 10_000_000},
	}
}

// chainPlugins are the plugins of the standard chain, by executable name.
var chainPlugins = []string{"loopback", "bridge", "host-local", "portmap", "bandwidth"}

// driver runs one attachment's ADD, CHECK and DEL: through libcni exec'ing a build's
// plugins, or through our own runner with every plugin in-process.
type driver interface {
	add(ctx context.Context, p pod) (netip.Addr, error)
	check(ctx context.Context, p pod) error
	del(ctx context.Context, p pod) error
}

type libcniDriver struct {
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

func (d *libcniDriver) rt(p pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns.Path, IfName: p.ifName, CapabilityArgs: capArgs(p.i)}
}

func (d *libcniDriver) add(ctx context.Context, p pod) (netip.Addr, error) {
	res, err := d.cni.AddNetworkList(ctx, d.list, d.rt(p))
	if err != nil {
		return netip.Addr{}, err
	}
	r, err := types100.GetResult(res)
	if err != nil || len(r.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("result without IPs: %v", err)
	}
	a, _ := netip.AddrFromSlice(r.IPs[0].Address.IP)
	return a.Unmap(), nil
}

func (d *libcniDriver) check(ctx context.Context, p pod) error {
	return d.cni.CheckNetworkList(ctx, d.list, d.rt(p))
}

func (d *libcniDriver) del(ctx context.Context, p pod) error {
	return d.cni.DelNetworkList(ctx, d.list, d.rt(p))
}

type runnerDriver struct {
	r   *chain.Runner
	net *chain.Network
}

func (d *runnerDriver) att(p pod) chain.Attachment {
	return chain.Attachment{ContainerID: p.id, Netns: p.ns.Path, IfName: p.ifName, CapabilityArgs: capArgs(p.i)}
}

func (d *runnerDriver) add(ctx context.Context, p pod) (netip.Addr, error) {
	res, err := d.r.Add(ctx, d.net, d.att(p))
	if err != nil {
		return netip.Addr{}, err
	}
	if len(res.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("result without IPs")
	}
	return res.IPs[0].Address.Addr(), nil
}

func (d *runnerDriver) check(ctx context.Context, p pod) error {
	return d.r.Check(ctx, d.net, d.att(p))
}

func (d *runnerDriver) del(ctx context.Context, p pod) error {
	return d.r.Del(ctx, d.net, d.att(p))
}

// arrangement is how a scenario runs the standard chain.
type arrangement struct {
	build build
	// inProcess is our runner with every plugin in-process, instead of libcni; only
	// for ours (the code of another build is not in this program).
	inProcess bool
	// embed is libcni with pkg/inproc's Exec plugged in: every plugin in-process, as a
	// runtime that embeds us runs them; only for ours, as inProcess.
	embed bool
	// backend forces masquerade's and portmap's rule backend; "" is each plugin's
	// default.
	backend string
	// oneChain is the list written as one chain plugin: one exec per operation.
	oneChain bool
	// floor is no CNI at all: the kernel objects of a pod made with the fewest
	// netlink messages (floor.go).
	floor bool
}

// describe names the arrangement in figure names, the build aside.
func (a arrangement) describe() string {
	how := "four execs via libcni"
	switch {
	case a.floor:
		return "floor: the kernel objects alone"
	case a.inProcess:
		how = "in-process runner"
	case a.embed:
		how = "libcni with inproc.Exec"
	case a.oneChain:
		how = "one chain exec via libcni"
	}
	be := "default backend"
	if a.backend != "" {
		be = a.backend
	}
	return how + ", " + be
}

// scenario is one throwaway host namespace with a plugin dir, data and cache dirs.
type scenario struct {
	host      *testns.NS
	pluginDir string
	tmp       string
	drv       driver
	clock     *pluginClock
	closers   []func()
}

func (b *bench) newScenario(a arrangement) (s *scenario, err error) {
	s = &scenario{clock: newPluginClock()}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.host, err = testns.Create(); err != nil {
		return nil, err
	}
	if s.tmp, err = os.MkdirTemp("", "cnibench-chain-"); err != nil {
		return nil, err
	}
	names := chainPlugins
	if !a.build.isRef() {
		names = append(names[:len(names):len(names)], "chain")
	}
	if s.pluginDir, err = a.build.pluginDir(names...); err != nil {
		return nil, err
	}
	conf := standardChain(s.tmp+"/ipam", a.backend)
	if a.oneChain {
		if conf, err = asChainPlugin(conf); err != nil {
			return nil, err
		}
	}
	if a.floor {
		err = s.host.Do(func() error {
			d, err := newFloorDriver(s.clock)
			if d != nil {
				s.closers = append(s.closers, d.close)
				s.drv = d
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	} else if a.inProcess {
		n, err := chain.Parse(conf)
		if err != nil {
			return nil, err
		}
		s.drv = &runnerDriver{r: &chain.Runner{Builtin: s.clock.wrap(dispatch.Lookup), PluginPath: []string{s.pluginDir}, CacheDir: s.tmp + "/cache"}, net: n}
	} else {
		list, err := libcni.ConfListFromBytes(conf)
		if err != nil {
			return nil, err
		}
		var exec invoke.Exec = s.clock
		if a.embed {
			exec = &inproc.Exec{}
		}
		s.drv = &libcniDriver{cni: libcni.NewCNIConfigWithCacheDir([]string{s.pluginDir}, s.tmp+"/cache", exec), list: list}
	}
	err = s.host.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return s, err
}

func (s *scenario) close() {
	for _, c := range s.closers {
		c()
	}
	if s.host != nil {
		s.host.Close()
	}
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	if s.pluginDir != "" {
		os.RemoveAll(s.pluginDir)
	}
}

// pod is one attachment: a container namespace and the interface name in it.
type pod struct {
	id     string
	ns     *testns.NS
	ifName string
	i      int
}

// newPods makes n pods, each in a namespace of its own.
func newPods(prefix string, from, n int) ([]pod, error) {
	pods := make([]pod, 0, n)
	for i := from; i < from+n; i++ {
		ns, err := testns.Create()
		if err != nil {
			closePods(pods)
			return nil, err
		}
		pods = append(pods, pod{id: fmt.Sprintf("%s%d", prefix, i), ns: ns, ifName: "eth0", i: i})
	}
	return pods, nil
}

// podsPerNamespace is how many resident pods share one container namespace, each
// under its own interface name. What a pod costs the host (its veth end, bridge port,
// rules, qdiscs, reservation) is the same; a thousand namespaces would cost the machine
// a thousand namespace teardowns and measure nothing more.
const podsPerNamespace = 25

// newResidentPods makes n pods that share namespaces podsPerNamespace at a time.
func newResidentPods(prefix string, from, n int) ([]pod, error) {
	pods := make([]pod, 0, n)
	var ns *testns.NS
	for i := from; i < from+n; i++ {
		k := i - from
		if k%podsPerNamespace == 0 {
			var err error
			if ns, err = testns.Create(); err != nil {
				closePods(pods)
				return nil, err
			}
		}
		pods = append(pods, pod{id: fmt.Sprintf("%s%d", prefix, i), ns: ns, ifName: fmt.Sprintf("eth%d", k%podsPerNamespace), i: i})
	}
	return pods, nil
}

func closePods(pods []pod) {
	for _, p := range pods {
		p.ns.Close() // closing a shared namespace twice is harmless
	}
}
