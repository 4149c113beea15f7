package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/spec/skel"
)

// firewallScaleConf is one attachment's firewall config with a prevResult giving it
// address 10.98.x.y; backend "" leaves the backend to the rule.
func firewallScaleConf(backend string, i int) []byte {
	be := ""
	if backend != "" {
		be = fmt.Sprintf(`"backend":%q,`, backend)
	}
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"fwbench","type":"firewall",%s
		"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"fwbench0"},{"name":"eth0","sandbox":"/run/netns/fw"}],
		"ips":[{"address":"10.98.%d.%d/16","interface":1}]}}`, be, (i/250)%250, i%250+2))
}

// firewallScale measures exec'd firewall ADD, CHECK and DEL of one attachment with 10
// and 1,000 attachments' rules installed, every build taking turns.
func (b *bench) firewallScale() error {
	levels := []int{10, 1000}
	if b.quick {
		levels = []int{10, 100}
	}
	var runs []*firewallRun
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for _, bd := range b.allBuilds("scale", "firewall") {
		r, err := newFirewallRun(bd)
		if err != nil {
			return fmt.Errorf("firewall [%s]: %w", bd.label, err)
		}
		runs = append(runs, r)
	}
	for _, level := range levels {
		for _, r := range runs {
			if err := r.grow(level); err != nil {
				return fmt.Errorf("firewall [%s]: %w", r.bd.label, err)
			}
			r.times = map[string][]time.Duration{}
		}
		n := b.iterations(30)
		for i := range n {
			for _, k := range rotated(indexes(len(runs)), i) {
				if err := runs[k].cycle(100_000 + level + i); err != nil {
					return fmt.Errorf("firewall [%s]: %w", runs[k].bd.label, err)
				}
			}
		}
		for _, r := range runs {
			for _, op := range chainOps {
				b.recordFor(r.bd, "scale", fmt.Sprintf("%-5s firewall exec'd, iptables @%d", op, level), timing.MedianMs(r.times[op]), "ms", fmt.Sprintf("%d runs, in turn", n))
			}
		}
	}
	return nil
}

// firewallRun is one build's host with its installed attachments.
type firewallRun struct {
	*pluginHost
	bd        build
	backend   string // "" leaves it to the rule
	installed int
	times     map[string][]time.Duration
}

func newFirewallRun(bd build) (*firewallRun, error) {
	h, err := newPluginHost(bd, "firewall")
	if err != nil {
		return nil, err
	}
	return &firewallRun{pluginHost: h, bd: bd, backend: "iptables", times: map[string][]time.Duration{}}, nil
}

func (r *firewallRun) args(cmd string, i int) skel.Args {
	return skel.Args{Command: cmd, ContainerID: fmt.Sprintf("fw%d", i), Netns: r.ctr.Path, IfName: "eth0", Path: []string{r.dir}, Env: os.Environ()}
}

func (r *firewallRun) exec(cmd string, i int) error {
	return runPlugin(filepath.Join(r.dir, "firewall"), r.args(cmd, i), firewallScaleConf(r.backend, i))
}

// grow installs attachments up to n, untimed.
func (r *firewallRun) grow(n int) error {
	return r.host.Do(func() error {
		for ; r.installed < n; r.installed++ {
			if err := r.exec("ADD", r.installed); err != nil {
				return err
			}
		}
		return nil
	})
}

// cycle times ADD, CHECK and DEL of attachment i.
func (r *firewallRun) cycle(i int) error {
	return r.host.Do(func() error {
		for _, op := range chainOps {
			start := time.Now()
			if err := r.exec(op, i); err != nil {
				return err
			}
			r.times[op] = append(r.times[op], time.Since(start))
		}
		return nil
	})
}
