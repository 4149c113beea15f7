package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
	"github.com/cnikit/cni/internal/timing"
)

// hostDevice measures exec'd ADD and DEL of host-device moving a veth end into a
// container and back, without IPAM and with host-local, beside the reference plugin
// when -ref holds one.
func (b *bench) hostDevice() error {
	type impl struct {
		label string
		dir   func() (string, error)
	}
	impls := []impl{{"ours", func() (string, error) { return linkDir(b.bin, "host-device", "host-local") }}}
	if b.ref != "" {
		if _, err := os.Stat(filepath.Join(b.ref, "host-device")); err == nil {
			impls = append(impls, impl{"reference", func() (string, error) {
				return linkEach(func(name string) string { return filepath.Join(b.ref, name) }, "host-device", "host-local")
			}})
		} else {
			b.record("host-device", "reference", 0, "", "skipped: no host-device in -ref")
		}
	}
	medians := map[string]float64{}
	for _, ipam := range []bool{false, true} {
		for _, im := range impls {
			dir, err := im.dir()
			if err != nil {
				return err
			}
			add, del, err := b.measureHostDevice(filepath.Join(dir, "host-device"), ipam)
			os.RemoveAll(dir)
			if err != nil {
				return fmt.Errorf("%s: %w", im.label, err)
			}
			what := "no IPAM"
			if ipam {
				what = "host-local"
			}
			for _, f := range []struct {
				cmd string
				d   []time.Duration
			}{{"ADD", add}, {"DEL", del}} {
				name := fmt.Sprintf("%s exec'd, %s, %s", f.cmd, what, im.label)
				medians[name] = timing.MedianMs(f.d)
				b.record("host-device", name, medians[name], "ms", fmt.Sprintf("%d runs", len(f.d)))
				if ours, ok := medians[fmt.Sprintf("%s exec'd, %s, ours", f.cmd, what)]; ok && im.label == "reference" {
					b.record("host-device", fmt.Sprintf("%s %s: ours / reference", f.cmd, what), ours/medians[name], "x", "")
					b.target("<= 0.5")
				}
			}
		}
	}
	return nil
}

// measureHostDevice moves one veth end into one container and back, again and again.
func (b *bench) measureHostDevice(plugin string, withIPAM bool) (add, del []time.Duration, err error) {
	host, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer host.Close()
	peer, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer peer.Close()
	cont, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer cont.Close()
	tmp, err := os.MkdirTemp("", "cnibench-hostdevice-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)

	ipam := ""
	if withIPAM {
		ipam = fmt.Sprintf(`,"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.77.0.0/16"}]]}`, tmp+"/ipam")
	}
	conf := []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"benchhd","type":"host-device","device":"bench0","dataDir":%q%s}`,
		tmp+"/state", ipam))
	args := func(cmd string) skel.Args {
		return skel.Args{Command: cmd, ContainerID: "bench", Netns: cont.Path, IfName: "eth0", Path: []string{filepath.Dir(plugin)}}
	}
	n := b.iterations(100)
	err = host.Do(func() error {
		if err := benchVeth(peer); err != nil {
			return err
		}
		for i := 0; i < n+5; i++ {
			start := time.Now()
			if err := runPlugin(plugin, args("ADD"), conf); err != nil {
				return err
			}
			mid := time.Now()
			if err := runPlugin(plugin, args("DEL"), conf); err != nil {
				return err
			}
			if i >= 5 { // warm-up runs are not counted
				add, del = append(add, mid.Sub(start)), append(del, time.Since(mid))
			}
		}
		return nil
	})
	return add, del, err
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
