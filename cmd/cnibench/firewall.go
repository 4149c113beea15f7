package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// fwArm is one build's firewall with one backend: its own host namespace, filled with
// other attachments, where one more attachment is ADDed and DELeted.
type fwArm struct {
	bd           build
	bin, backend string
	present      int
	host, cont   *testns.NS
	add, del     []time.Duration
	// skipped: a build other than ours that refused this backend (a -base from before
	// the nftables backend); its figures are left out.
	skipped bool
}

// firewallConf is a dual-stack attachment's firewall config with its prevResult.
func firewallConf(backend string, i int) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"fwbench","type":"firewall","backend":%q,
		"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/var/run/netns/x"}],
		"ips":[{"address":"10.40.%d.%d/16","interface":1},{"address":"fd40::%x/64","interface":1}]}}`, backend, i/250, i%250+2, i+2))
}

// firewall measures exec'd firewall ADD and DEL with the nftables and iptables backends
// of ours and of -base, and the reference's (iptables), with 10 and 300 other
// attachments installed. All arms take turns, one ADD+DEL each, so that the machine's
// load hits all alike, the 10 and the 300 of one backend too.
func (b *bench) firewall() error {
	var impls []fwArm
	for _, bd := range b.allBuilds("firewall", "firewall") {
		dir, err := bd.pluginDir("firewall")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "firewall")
		backends := []string{"nftables", "iptables"}
		if bd.isRef() {
			backends = []string{"iptables"}
		}
		for _, backend := range backends {
			impls = append(impls, fwArm{bd: bd, bin: bin, backend: backend})
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
	// arm finds the arm of a build label and backend among one size's.
	arm := func(present int, label, backend string) *fwArm {
		for _, a := range arms[present] {
			if a.bd.label == label && a.backend == backend && !a.skipped {
				return a
			}
		}
		return nil
	}
	for _, present := range sizes {
		for _, a := range arms[present] {
			if a.skipped {
				continue
			}
			b.recordFor(a.bd, "firewall", fmt.Sprintf("ADD exec'd, %s, %d attachments", a.backend, present), timing.MedianMs(a.add), "ms", "")
			b.recordFor(a.bd, "firewall", fmt.Sprintf("DEL exec'd, %s, %d attachments", a.backend, present), timing.MedianMs(a.del), "ms", "")
		}
		nft, ref := arm(present, labelOurs, "nftables"), arm(present, labelRef, "iptables")
		if ref != nil {
			b.record("firewall", fmt.Sprintf("ADD nftables: ours / reference, %d attachments", present), timing.MedianMs(nft.add)/timing.MedianMs(ref.add), "x", "")
			b.target("<= 0.5")
			b.record("firewall", fmt.Sprintf("DEL nftables: ours / reference, %d attachments", present), timing.MedianMs(nft.del)/timing.MedianMs(ref.del), "x", "")
			b.target("<= 0.5")
		}
	}
	if len(sizes) == 2 {
		b.record("firewall", "ADD nftables: 300 attachments / 10", timing.MedianMs(arm(300, labelOurs, "nftables").add)/timing.MedianMs(arm(10, labelOurs, "nftables").add), "x", "")
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
		if err != nil && a.bd.label != labelOurs {
			a.skipped = true
			b.recordFor(a.bd, "firewall", fmt.Sprintf("%s, %d attachments", a.backend, a.present), 0, "", "skipped: "+strings.Join(strings.Fields(err.Error()), " "))
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.label(), err)
		}
	}
	arms = slices.DeleteFunc(slices.Clone(arms), func(a *fwArm) bool { return a.skipped })
	n := b.iterations(40)
	for i := 0; i < n+3; i++ {
		for _, a := range rotated(arms, i) {
			if err := a.addDel(i >= 3); err != nil { // warm-up runs are not counted
				return fmt.Errorf("%s: %w", a.label(), err)
			}
		}
	}
	return nil
}

func (a *fwArm) label() string { return a.bd.label + " " + a.backend }

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
