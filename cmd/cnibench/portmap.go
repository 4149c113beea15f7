package main

import (
	"bytes"
	"fmt"
	"github.com/cnikit/cni/internal/core/timing"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
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
// containers' mappings already installed, for every build, the builds taking turns
// attachment by attachment (each in a host namespace of its own).
func (b *bench) portmap() error {
	builds := b.allBuilds("portmap", "portmap")
	for _, backend := range []string{"nftables", "iptables"} {
		for _, present := range []int{10, 300} {
			if b.quick && present > 10 {
				continue
			}
			var runs []*portmapRun
			for _, bd := range builds {
				r, err := newPortmapRun(bd, backend, present)
				if err != nil {
					return fmt.Errorf("%s [%s] at %d: %w", backend, bd.label, present, err)
				}
				defer r.close()
				runs = append(runs, r)
			}
			n := b.iterations(40)
			for i := range n {
				for _, k := range rotated(indexes(len(runs)), i) {
					if err := runs[k].addDel(present + i); err != nil {
						return fmt.Errorf("%s [%s] at %d: %w", backend, runs[k].bd.label, present, err)
					}
				}
			}
			target := map[string]string{"nftables": "<= 3 ms", "iptables": "<= 10 ms"}[backend]
			for _, r := range runs {
				b.recordFor(r.bd, "portmap", fmt.Sprintf("ADD exec'd, %s, %d containers mapped", backend, present), timing.MedianMs(r.add), "ms", "")
				if r.bd.label == labelOurs {
					b.target(target)
				}
				b.recordFor(r.bd, "portmap", fmt.Sprintf("DEL exec'd, %s, %d containers mapped", backend, present), timing.MedianMs(r.del), "ms", "")
				if r.bd.label == labelOurs {
					b.target(target)
				}
			}
		}
	}
	return nil
}

// portmapRun is one build's host with present containers' mappings installed.
type portmapRun struct {
	*pluginHost
	bd       build
	backend  string
	add, del []time.Duration
}

func newPortmapRun(bd build, backend string, present int) (r *portmapRun, err error) {
	h, err := newPluginHost(bd, "portmap")
	if err != nil {
		return nil, err
	}
	r = &portmapRun{pluginHost: h, bd: bd, backend: backend}
	err = r.host.Do(func() error {
		if err := hostBridge("pmbench0", "10.99.0.1/16"); err != nil {
			return err
		}
		for i := range present {
			if err := runPlugin(r.plugin(), r.args("ADD", i), portmapConf(backend, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *portmapRun) plugin() string { return filepath.Join(r.dir, "portmap") }

func (r *portmapRun) args(cmd string, i int) skel.Args {
	return skel.Args{Command: cmd, ContainerID: fmt.Sprintf("pm%d", i), Netns: r.ctr.Path, IfName: "eth0", Path: []string{r.dir}, Env: os.Environ()}
}

// addDel times one attachment's ADD and its DEL.
func (r *portmapRun) addDel(i int) error {
	return r.host.Do(func() error {
		start := time.Now()
		if err := runPlugin(r.plugin(), r.args("ADD", i), portmapConf(r.backend, i)); err != nil {
			return err
		}
		mid := time.Now()
		if err := runPlugin(r.plugin(), r.args("DEL", i), portmapConf(r.backend, i)); err != nil {
			return err
		}
		r.add, r.del = append(r.add, mid.Sub(start)), append(r.del, time.Since(mid))
		return nil
	})
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

// rss execs one bridge+host-local ADD and DEL (masquerade on, default backend) for each
// of our builds and reports the child's peak resident set.
func (b *bench) rss() error {
	for _, bd := range b.ourBuilds() {
		if err := b.rssOf(bd); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) rssOf(bd build) error {
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
	pluginDir, err := bd.pluginDir("bridge", "host-local")
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
			b.recordFor(bd, "size", fmt.Sprintf("peak RSS of one exec'd bridge+host-local %s", c), maxRSS(cmd.ProcessState), "MB", "")
			if bd.label == labelOurs {
				b.target("<= 20 MB")
			}
		}
		return nil
	})
}
