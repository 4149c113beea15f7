package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// fwArm is one firewall implementation and backend measured: its own host namespace,
// filled with other attachments, where one more attachment is ADDed and DELeted.
type fwArm struct {
	label, bin, backend string
	present             int
	host, cont          *testns.NS
	add, del            []time.Duration
}

// firewallConf is a dual-stack attachment's firewall config with its prevResult.
func firewallConf(backend string, i int) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"fwbench","type":"firewall","backend":%q,
		"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/var/run/netns/x"}],
		"ips":[{"address":"10.40.%d.%d/16","interface":1},{"address":"fd40::%x/64","interface":1}]}}`, backend, i/250, i%250+2, i+2))
}

// firewall measures exec'd firewall ADD and DEL with our nftables and iptables backends
// and the reference's (iptables), with 10 and 300 other attachments installed. All arms
// take turns, one ADD+DEL each, so that the machine's load hits all alike, the 10 and
// the 300 of one backend too.
func (b *bench) firewall() error {
	pluginDir, err := linkDir(b.bin, "firewall")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pluginDir)
	ours := filepath.Join(pluginDir, "firewall")
	impls := []fwArm{{label: "ours nftables", bin: ours, backend: "nftables"}, {label: "ours iptables", bin: ours, backend: "iptables"}}
	if b.ref != "" {
		if _, err := os.Stat(filepath.Join(b.ref, "firewall")); err == nil {
			impls = append(impls, fwArm{label: "reference iptables", bin: filepath.Join(b.ref, "firewall"), backend: "iptables"})
		} else {
			b.record("firewall", "reference", 0, "", "skipped: no firewall in -ref")
		}
	}
	sizes := []int{10, 300}
	if b.quick {
		sizes = sizes[:1]
	}
	arms := map[int][]*fwArm{}
	var all []*fwArm
	for _, present := range sizes {
		for _, impl := range impls {
			a := impl
			a.present = present
			arms[present] = append(arms[present], &a)
			all = append(all, &a)
		}
	}
	if err := b.measureFirewall(all); err != nil {
		return err
	}
	for _, present := range sizes {
		for _, a := range arms[present] {
			b.record("firewall", fmt.Sprintf("ADD exec'd, %s, %d attachments", a.label, present), timing.MedianMs(a.add), "ms", "")
			b.record("firewall", fmt.Sprintf("DEL exec'd, %s, %d attachments", a.label, present), timing.MedianMs(a.del), "ms", "")
		}
		if as := arms[present]; len(as) == 3 {
			b.record("firewall", fmt.Sprintf("ADD nftables: ours / reference, %d attachments", present), timing.MedianMs(as[0].add)/timing.MedianMs(as[2].add), "x", "")
			b.target("<= 0.5")
			b.record("firewall", fmt.Sprintf("DEL nftables: ours / reference, %d attachments", present), timing.MedianMs(as[0].del)/timing.MedianMs(as[2].del), "x", "")
			b.target("<= 0.5")
		}
	}
	if len(sizes) == 2 {
		b.record("firewall", "ADD nftables: 300 attachments / 10", timing.MedianMs(arms[300][0].add)/timing.MedianMs(arms[10][0].add), "x", "")
		b.target("<= 1 (sets and maps, no rule scans)")
	}
	return nil
}

func (b *bench) measureFirewall(arms []*fwArm) error {
	for _, a := range arms {
		var err error
		if a.host, err = testns.Create(); err != nil {
			return err
		}
		defer a.host.Close()
		if a.cont, err = testns.Create(); err != nil {
			return err
		}
		defer a.cont.Close()
		err = a.host.Do(func() error {
			for i := 1; i <= a.present; i++ {
				if err := runPlugin(a.bin, a.args("ADD", i), firewallConf(a.backend, i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", a.label, err)
		}
	}
	n := b.iterations(40)
	for i := 0; i < n+3; i++ {
		for _, a := range arms {
			if err := a.addDel(i >= 3); err != nil { // warm-up runs are not counted
				return fmt.Errorf("%s: %w", a.label, err)
			}
		}
	}
	return nil
}

func (a *fwArm) args(cmd string, i int) skel.Args {
	return skel.Args{Command: cmd, ContainerID: fmt.Sprintf("fw%d", i), Netns: a.cont.Path, IfName: "eth0",
		Path: []string{filepath.Dir(a.bin)}, Env: os.Environ()}
}

func (a *fwArm) addDel(count bool) error {
	return a.host.Do(func() error {
		start := time.Now()
		if err := runPlugin(a.bin, a.args("ADD", 0), firewallConf(a.backend, 0)); err != nil {
			return err
		}
		added := time.Since(start)
		start = time.Now()
		if err := runPlugin(a.bin, a.args("DEL", 0), firewallConf(a.backend, 0)); err != nil {
			return err
		}
		if count {
			a.add, a.del = append(a.add, added), append(a.del, time.Since(start))
		}
		return nil
	})
}
