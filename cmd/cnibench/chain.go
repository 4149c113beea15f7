package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/testns"
	"github.com/cnikit/cni/internal/timing"
)

// standardChain is the chain Kubernetes runtimes ship: loopback, bridge with host-local
// and masquerade, portmap, bandwidth. backend "" means each plugin's default.
func standardChain(dataDir, backend string) []byte {
	if backend == referenceBackend {
		backend = ""
	}
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
		"portMappings": []map[string]any{{"hostPort": 20000 + i, "containerPort": 80, "protocol": "tcp"}},
		"bandwidth":    map[string]any{"ingressRate": 1_000_000_000, "ingressBurst": 10_000_000, "egressRate": 1_000_000_000, "egressBurst": 10_000_000},
	}
}

// chainPlugins are the plugins of the standard chain, by executable name.
var chainPlugins = []string{"loopback", "bridge", "host-local", "portmap", "bandwidth"}

// referenceBackend stands for "the reference plugins, each with its own default backend"
// where a scenario takes a backend.
const referenceBackend = "reference"

// referenceDir links the reference plugins into a fresh plugin directory.
func (b *bench) referenceDir() (string, error) {
	return linkEach(func(name string) string { return filepath.Join(b.ref, name) }, chainPlugins...)
}

// driver runs one attachment's ADD, CHECK and DEL: through libcni exec'ing our binary, or
// through our own runner with every plugin in-process.
type driver interface {
	add(ctx context.Context, id, netns string, i int) (netip.Addr, error)
	check(ctx context.Context, id, netns string, i int) error
	del(ctx context.Context, id, netns string, i int) error
}

type libcniDriver struct {
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

func (d *libcniDriver) rt(id, netns string, i int) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: "eth0", CapabilityArgs: capArgs(i)}
}

func (d *libcniDriver) add(ctx context.Context, id, netns string, i int) (netip.Addr, error) {
	res, err := d.cni.AddNetworkList(ctx, d.list, d.rt(id, netns, i))
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

func (d *libcniDriver) check(ctx context.Context, id, netns string, i int) error {
	return d.cni.CheckNetworkList(ctx, d.list, d.rt(id, netns, i))
}

func (d *libcniDriver) del(ctx context.Context, id, netns string, i int) error {
	return d.cni.DelNetworkList(ctx, d.list, d.rt(id, netns, i))
}

type runnerDriver struct {
	r   *chain.Runner
	net *chain.Network
}

func (d *runnerDriver) att(id, netns string, i int) chain.Attachment {
	return chain.Attachment{ContainerID: id, Netns: netns, IfName: "eth0", CapabilityArgs: capArgs(i)}
}

func (d *runnerDriver) add(ctx context.Context, id, netns string, i int) (netip.Addr, error) {
	res, err := d.r.Add(ctx, d.net, d.att(id, netns, i))
	if err != nil {
		return netip.Addr{}, err
	}
	if len(res.IPs) == 0 {
		return netip.Addr{}, fmt.Errorf("result without IPs")
	}
	return res.IPs[0].Address.Addr(), nil
}

func (d *runnerDriver) check(ctx context.Context, id, netns string, i int) error {
	return d.r.Check(ctx, d.net, d.att(id, netns, i))
}

func (d *runnerDriver) del(ctx context.Context, id, netns string, i int) error {
	return d.r.Del(ctx, d.net, d.att(id, netns, i))
}

// scenario is one throwaway host namespace with a plugin dir, data and cache dirs.
type scenario struct {
	host      *testns.NS
	pluginDir string
	tmp       string
	drv       driver
}

func (b *bench) newScenario(viaLibcni bool, backend string, oneChainPlugin bool) (*scenario, error) {
	host, err := testns.Create()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "cnibench-chain-")
	if err != nil {
		host.Close()
		return nil, err
	}
	var pluginDir string
	if backend == referenceBackend {
		pluginDir, err = b.referenceDir()
	} else {
		pluginDir, err = linkDir(b.bin, append(chainPlugins, "chain")...)
	}
	if err != nil {
		return nil, err
	}
	s := &scenario{host: host, pluginDir: pluginDir, tmp: tmp}
	conf := standardChain(tmp+"/ipam", backend)
	if oneChainPlugin {
		if conf, err = asChainPlugin(conf); err != nil {
			return nil, err
		}
	}
	if viaLibcni {
		list, err := libcni.ConfListFromBytes(conf)
		if err != nil {
			return nil, err
		}
		s.drv = &libcniDriver{cni: libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, tmp+"/cache", nil), list: list}
	} else {
		n, err := chain.Parse(conf)
		if err != nil {
			return nil, err
		}
		s.drv = &runnerDriver{r: &chain.Runner{Builtin: dispatch.Lookup, PluginPath: []string{pluginDir}, CacheDir: tmp + "/cache"}, net: n}
	}
	err = host.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	return s, err
}

func (s *scenario) close() {
	s.host.Close()
	os.RemoveAll(s.tmp)
	os.RemoveAll(s.pluginDir)
}

// pod is one container namespace with its attachment.
type pod struct {
	id string
	ns *testns.NS
	i  int
}

func newPods(prefix string, from, n int) ([]pod, error) {
	pods := make([]pod, 0, n)
	for i := from; i < from+n; i++ {
		ns, err := testns.Create()
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod{id: fmt.Sprintf("%s%d", prefix, i), ns: ns, i: i})
	}
	return pods, nil
}

func closePods(pods []pod) {
	for _, p := range pods {
		p.ns.Close()
	}
}

// chainPerPod measures ADD, CHECK and DEL of single pods with `present` pods already
// attached, for each driver and backend.
func (b *bench) chainPerPod() error {
	type combo struct {
		label   string
		libcni  bool
		backend string
	}
	combos := []combo{
		{"libcni exec, default backend", true, ""},
		{"libcni exec, iptables forced", true, "iptables"},
		{"in-process runner, default backend", false, ""},
		{"in-process runner, iptables forced", false, "iptables"},
	}
	if b.ref != "" {
		combos = append(combos, combo{"libcni exec, reference plugins", true, referenceBackend})
	}
	measured := b.iterations(30)
	for _, c := range combos {
		for _, present := range []int{10, 300} {
			if b.quick && present > 10 {
				continue
			}
			add, check, del, err := b.measureChain(c.libcni, c.backend, present, measured)
			if err != nil {
				return fmt.Errorf("%s at %d pods: %w", c.label, present, err)
			}
			note := fmt.Sprintf("%d pods present", present)
			b.record("chain", fmt.Sprintf("ADD   %s @%d", c.label, present), timing.MedianMs(add), "ms", note)
			b.record("chain", fmt.Sprintf("CHECK %s @%d", c.label, present), timing.MedianMs(check), "ms", note)
			b.record("chain", fmt.Sprintf("DEL   %s @%d", c.label, present), timing.MedianMs(del), "ms", note)
			if c.label == "in-process runner, default backend" && present == 10 {
				b.target("≤ 30 ms (issue 18)")
			}
		}
	}
	return nil
}

func (b *bench) measureChain(viaLibcni bool, backend string, present, measured int) (add, check, del []time.Duration, err error) {
	s, err := b.newScenario(viaLibcni, backend, false)
	if err != nil {
		return nil, nil, nil, err
	}
	defer s.close()
	background, err := newPods("bg", 0, present)
	if err != nil {
		return nil, nil, nil, err
	}
	defer closePods(background)
	pods, err := newPods("pod", present, measured)
	if err != nil {
		return nil, nil, nil, err
	}
	defer closePods(pods)
	ctx := context.Background()
	err = s.host.Do(func() error {
		for _, p := range background {
			if _, err := s.drv.add(ctx, p.id, p.ns.Path, p.i); err != nil {
				return err
			}
		}
		for _, p := range pods {
			start := time.Now()
			if _, err := s.drv.add(ctx, p.id, p.ns.Path, p.i); err != nil {
				return err
			}
			add = append(add, time.Since(start))
		}
		for _, p := range pods {
			start := time.Now()
			if err := s.drv.check(ctx, p.id, p.ns.Path, p.i); err != nil {
				return err
			}
			check = append(check, time.Since(start))
		}
		for _, p := range pods {
			start := time.Now()
			if err := s.drv.del(ctx, p.id, p.ns.Path, p.i); err != nil {
				return err
			}
			del = append(del, time.Since(start))
		}
		for _, p := range background {
			if err := s.drv.del(ctx, p.id, p.ns.Path, p.i); err != nil {
				return err
			}
		}
		return nil
	})
	return add, check, del, err
}

// concurrency runs 8 parallel streams of ADD then DEL through libcni and checks that no
// address was handed out twice while the pods were alive together.
func (b *bench) concurrency() error {
	const streams = 8
	perStream := b.iterations(20)
	s, err := b.newScenario(true, "", false)
	if err != nil {
		return err
	}
	defer s.close()
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	var dup []string
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	start := time.Now()
	for st := 0; st < streams; st++ {
		pods, err := newPods(fmt.Sprintf("s%d-", st), st*perStream, perStream)
		if err != nil {
			return err
		}
		defer closePods(pods)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.host.Do(func() error {
				ctx := context.Background()
				for _, p := range pods {
					a, err := s.drv.add(ctx, p.id, p.ns.Path, p.i)
					if err != nil {
						return err
					}
					mu.Lock()
					if other, ok := seen[a]; ok {
						dup = append(dup, fmt.Sprintf("%s given to %s and %s", a, other, p.id))
					}
					seen[a] = p.id
					mu.Unlock()
				}
				for _, p := range pods {
					if err := s.drv.del(ctx, p.id, p.ns.Path, p.i); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	elapsed := time.Since(start)
	total := streams * perStream
	b.record("concurrency", "8 streams ADD+DEL via libcni, pods/s", float64(total)/elapsed.Seconds(), "pods/s", fmt.Sprintf("%d pods", total))
	b.record("concurrency", "addresses handed out twice", float64(len(dup)), "count", "must be 0")
	if len(dup) > 0 {
		return fmt.Errorf("duplicate addresses: %v", dup)
	}
	return nil
}
