package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// hostDevice measures exec'd ADD and DEL of host-device moving a veth end into a
// container and back, without IPAM and with host-local, for every build (the reference
// when -ref holds host-device). The builds take turns, one ADD+DEL each, so that a
// change in the machine's load hits all alike.
func (b *bench) hostDevice() error {
	builds := b.allBuilds("host-device", "host-device", "host-local")
	for _, withIPAM := range []bool{false, true} {
		what := "no IPAM"
		if withIPAM {
			what = "host-local"
		}
		var scens []*hdScenario
		for _, bd := range builds {
			s, err := newHDScenario(bd.path, withIPAM)
			if err != nil {
				return err
			}
			defer s.close()
			scens = append(scens, s)
		}
		n := b.iterations(100)
		for i := 0; i < n+5; i++ {
			for _, k := range rotated(indexes(len(scens)), i) {
				if err := scens[k].addDel(i >= 5); err != nil { // warm-up runs are not counted
					return err
				}
			}
		}
		for k, s := range scens {
			bd := builds[k]
			b.recordFor(bd, "host-device", fmt.Sprintf("ADD exec'd, %s", what), timing.MedianMs(s.add), "ms", fmt.Sprintf("%d runs", n))
			if bd.label == labelOurs && b.ref != "" {
				b.target("ours/ref <= 0.5")
			}
			b.recordFor(bd, "host-device", fmt.Sprintf("DEL exec'd, %s", what), timing.MedianMs(s.del), "ms", fmt.Sprintf("%d runs", n))
			if bd.label == labelOurs && b.ref != "" {
				b.target("ours/ref <= 0.5")
			}
		}
		// In-process, the same work without process starts: the floor set by the kernel's
		// namespace moves.
		inproc := &hdScenario{host: scens[0].host, cont: scens[0].cont, pluginDir: scens[0].pluginDir, conf: scens[0].conf}
		for i := 0; i < n+5; i++ {
			if err := inproc.addDelInProcess(i >= 5); err != nil {
				return err
			}
		}
		b.recordFor(b.ours(), "host-device", fmt.Sprintf("ADD in-process, %s", what), timing.MedianMs(inproc.add), "ms", fmt.Sprintf("%d runs", n))
		b.recordFor(b.ours(), "host-device", fmt.Sprintf("DEL in-process, %s", what), timing.MedianMs(inproc.del), "ms", fmt.Sprintf("%d runs", n))
	}
	return nil
}

// hdScenario is one host with one veth end ("bench0", its peer elsewhere) that
// host-device moves into one container and back.
type hdScenario struct {
	host, peer, cont *testns.NS
	tmp, pluginDir   string
	conf             []byte
	add, del         []time.Duration
}

func newHDScenario(target func(string) string, withIPAM bool) (s *hdScenario, err error) {
	s = &hdScenario{}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	for _, n := range []**testns.NS{&s.host, &s.peer, &s.cont} {
		if *n, err = testns.Create(); err != nil {
			return nil, err
		}
	}
	if s.tmp, err = os.MkdirTemp("", "cnibench-hostdevice-"); err != nil {
		return nil, err
	}
	if s.pluginDir, err = linkEach(target, "host-device", "host-local"); err != nil {
		return nil, err
	}
	ipam := ""
	if withIPAM {
		ipam = fmt.Sprintf(`,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.77.0.0/16"}]]}`, s.tmp+"/ipam")
	}
	s.conf = []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"benchhd","type":"host-device","device":"bench0","dataDir":%q%s}`,
		s.tmp+"/state", ipam))
	return s, s.host.Do(func() error { return benchVeth(s.peer) })
}

func (s *hdScenario) args(cmd string) skel.Args {
	return skel.Args{Command: cmd, ContainerID: "bench", Netns: s.cont.Path, IfName: "eth0", Path: []string{s.pluginDir}}
}

// addDel runs one exec'd ADD and DEL, recording their times when count is set.
func (s *hdScenario) addDel(count bool) error {
	plugin := filepath.Join(s.pluginDir, "host-device")
	return s.host.Do(func() error {
		start := time.Now()
		if err := runPlugin(plugin, s.args("ADD"), s.conf); err != nil {
			return err
		}
		mid := time.Now()
		if err := runPlugin(plugin, s.args("DEL"), s.conf); err != nil {
			return err
		}
		if count {
			s.add, s.del = append(s.add, mid.Sub(start)), append(s.del, time.Since(mid))
		}
		return nil
	})
}

// addDelInProcess is addDel with the plugin called in-process.
func (s *hdScenario) addDelInProcess(count bool) error {
	plugin := dispatch.Lookup("host-device")
	ctx := context.Background()
	return s.host.Do(func() error {
		start := time.Now()
		if _, err := skel.Invoke(ctx, plugin, s.args("ADD"), s.conf, nil); err != nil {
			return fmt.Errorf("in-process ADD: %w", err)
		}
		mid := time.Now()
		if _, err := skel.Invoke(ctx, plugin, s.args("DEL"), s.conf, nil); err != nil {
			return fmt.Errorf("in-process DEL: %w", err)
		}
		if count {
			s.add, s.del = append(s.add, mid.Sub(start)), append(s.del, time.Since(mid))
		}
		return nil
	})
}

func (s *hdScenario) close() {
	for _, n := range []*testns.NS{s.host, s.peer, s.cont} {
		if n != nil {
			n.Close()
		}
	}
	if s.tmp != "" {
		os.RemoveAll(s.tmp)
	}
	if s.pluginDir != "" {
		os.RemoveAll(s.pluginDir)
	}
}

// benchVeth creates "bench0" in the calling thread's namespace, up, its peer in peer.
func benchVeth(peer *testns.NS) error {
	f, err := os.Open(peer.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "bench0"}, PeerName: "bench0p", PeerNamespace: netlink.NsFd(f.Fd())}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	return netlink.LinkSetUp(v)
}
