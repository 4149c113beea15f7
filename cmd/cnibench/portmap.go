package main

import (
	"bytes"
	"fmt"
	"github.com/cnikit/cni/internal/timing"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
)

// portmapConf is one attachment's portmap config with a prevResult naming container
// address 10.99.x.y on eth0.
func portmapConf(backend string, i int) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"pmbench","type":"portmap","backend":%q,
		"runtimeConfig":{"portMappings":[{"hostPort":%d,"containerPort":80,"protocol":"tcp"}]},
		"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/pm"}],
		"ips":[{"address":"10.99.%d.%d/16","interface":0}]}}`, backend, 30000+i, i/250, i%250+2))
}

// portmap measures exec'd portmap ADD and DEL with each backend, with 10 and 300
// containers' mappings already installed.
func (b *bench) portmap() error {
	pluginDir, err := linkDir(b.bin, "portmap")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pluginDir)
	bin := filepath.Join(pluginDir, "portmap")
	for _, backend := range []string{"nftables", "iptables"} {
		for _, present := range []int{10, 300} {
			if b.quick && present > 10 {
				continue
			}
			add, del, err := b.measurePortmap(bin, backend, present)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", backend, present, err)
			}
			target := map[string]string{"nftables": "<= 3 ms", "iptables": "<= 10 ms"}[backend]
			b.record("portmap", fmt.Sprintf("ADD exec'd, %s, %d containers mapped", backend, present), timing.MedianMs(add), "ms", "")
			b.target(target)
			b.record("portmap", fmt.Sprintf("DEL exec'd, %s, %d containers mapped", backend, present), timing.MedianMs(del), "ms", "")
			b.target(target)
		}
	}
	return nil
}

func (b *bench) measurePortmap(bin, backend string, present int) (add, del []time.Duration, err error) {
	host, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer host.Close()
	ctr, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer ctr.Close()
	args := func(cmd string, i int) skel.Args {
		return skel.Args{Command: cmd, ContainerID: fmt.Sprintf("pm%d", i), Netns: ctr.Path, IfName: "eth0", Path: []string{filepath.Dir(bin)}, Env: os.Environ()}
	}
	err = host.Do(func() error {
		if err := hostBridge("pmbench0", "10.99.0.1/16"); err != nil {
			return err
		}
		for i := 0; i < present; i++ {
			if err := runPlugin(bin, args("ADD", i), portmapConf(backend, i)); err != nil {
				return err
			}
		}
		for i := present; i < present+b.iterations(40); i++ {
			start := time.Now()
			if err := runPlugin(bin, args("ADD", i), portmapConf(backend, i)); err != nil {
				return err
			}
			add = append(add, time.Since(start))
			start = time.Now()
			if err := runPlugin(bin, args("DEL", i), portmapConf(backend, i)); err != nil {
				return err
			}
			del = append(del, time.Since(start))
		}
		return nil
	})
	return add, del, err
}

// hostBridge gives the bench's host namespace an up bridge carrying addr, so routes to
// the fake containers exist; it also brings lo up.
func hostBridge(name, addr string) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(br); err != nil {
		return err
	}
	ip, ipnet, err := net.ParseCIDR(addr)
	if err != nil {
		return err
	}
	ipnet.IP = ip
	if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: ipnet}); err != nil {
		return err
	}
	return netlink.LinkSetUp(br)
}

// rss execs one bridge+host-local ADD (masquerade on, default backend) and reports the
// child's peak resident set.
func (b *bench) rss() error {
	host, err := testns.Create()
	if err != nil {
		return err
	}
	defer host.Close()
	ctr, err := testns.Create()
	if err != nil {
		return err
	}
	defer ctr.Close()
	tmp, err := os.MkdirTemp("", "cnibench-rss-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pluginDir, err := linkDir(b.bin, "bridge", "host-local")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pluginDir)
	conf := []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"rssnet","type":"bridge","bridge":"cnirss0","isGateway":true,"ipMasq":true,
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.77.0.0/24"}]]}}`, tmp))
	a := skel.Args{ContainerID: "rss1", Netns: ctr.Path, IfName: "eth0", Path: []string{pluginDir}, Env: os.Environ()}
	return host.Do(func() error {
		for _, c := range []string{"ADD", "DEL"} {
			cmd := exec.Command(filepath.Join(pluginDir, "bridge"))
			cmd.Env = a.Environ(c)
			cmd.Stdin = bytes.NewReader(conf)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("bridge %s: %v: %s", c, err, out.String())
			}
			b.record("size", fmt.Sprintf("peak RSS of one exec'd bridge+host-local %s", c), maxRSS(cmd.ProcessState), "MB", "")
			b.target("<= 20 MB")
		}
		return nil
	})
}
