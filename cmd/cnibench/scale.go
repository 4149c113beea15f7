package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/cnikit/cni/internal/core/timing"
)

// scale measures the standard chain at 10, 300 and 1,000 pods resident (ADD of the next
// pod, its CHECK, its DEL), both masquerade/portmap backends, every build, the arms
// taking turns operation by operation at each level; then GC through libcni with every
// resident pod valid, and `cni gc` over the same cache. Dense nodes run several hundred
// pods, and rule-based plugins are known to slow down with the rule count.
func (b *bench) scale() error {
	levels := []int{10, 300, 1000}
	if b.quick {
		levels = []int{10, 100}
	}
	var arrs []arrangement
	for _, bd := range b.allBuilds("scale", chainPlugins...) {
		for _, be := range []string{"iptables", "nftables"} {
			arrs = append(arrs, arrangement{build: bd, backend: be})
		}
	}
	arms, err := b.armsAt(arrs, 0)
	defer closeArms(arms)
	if err != nil {
		return err
	}
	at := map[int]map[*arm]map[string]float64{} // level → arm → op → median
	for _, level := range levels {
		for _, a := range arms {
			start := time.Now()
			if err := a.grow(level); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  (scale: %s at %d pods in %s)\n", a.name(), level, time.Since(start).Round(time.Second))
			a.reset()
		}
		if err := interleave(arms, b.iterations(20)); err != nil {
			return err
		}
		// Each plugin's share only at the top level, where growth shows.
		b.recordArms("scale", arms, level == levels[len(levels)-1])
		at[level] = map[*arm]map[string]float64{}
		for _, a := range arms {
			at[level][a] = map[string]float64{}
			for _, op := range chainOps {
				at[level][a][op] = timing.MedianMs(a.times[op])
			}
		}
	}
	top := levels[len(levels)-1]
	for _, a := range arms {
		for _, op := range chainOps {
			if low := at[levels[0]][a][op]; low > 0 {
				b.recordFor(a.arr.build, "scale", fmt.Sprintf("%-5s %s: @%d / @%d", op, a.arr.describe(), top, levels[0]), at[top][a][op]/low, "ratio", "same arm")
				if a.arr.build.label == labelOurs {
					t := "≤ 1.2 (issue 29)"
					if a.arr.backend == "iptables" {
						t += "; ≤ 1.5 (issue 35)"
					}
					b.target(t)
				}
			}
		}
	}
	for _, a := range arms {
		if err := b.scaleGC(a); err != nil {
			return err
		}
	}
	return b.firewallScale()
}

// scaleGC times one GC of the arm's network through libcni with every resident pod
// valid (the periodic GC of containerd: nothing stale, every plugin's GC scanning all
// it holds), and for our builds `cni gc` exec'd over the same cache.
func (b *bench) scaleGC(a *arm) error {
	valid := make([]types.GCAttachment, len(a.resident))
	flags := make([]string, 0, 2*len(a.resident)+2)
	flags = append(flags, "gc", "benchnet")
	for i, p := range a.resident {
		valid[i] = types.GCAttachment{ContainerID: p.id, IfName: p.ifName}
		flags = append(flags, "--valid", p.id+":"+p.ifName)
	}
	drv, ok := a.s.drv.(*libcniDriver)
	if !ok {
		return nil
	}
	n := len(a.resident)
	var took time.Duration
	err := a.s.host.Do(func() error {
		start := time.Now()
		err := drv.cni.GCNetworkList(context.Background(), drv.list, &libcni.GCArgs{ValidAttachments: valid})
		took = time.Since(start)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: GC: %w", a.name(), err)
	}
	b.recordFor(a.arr.build, "scale", fmt.Sprintf("GC via libcni, %s, %d cached, all valid", a.arr.describe(), n), timing.Ms(took), "ms", "one run")
	if a.arr.build.isRef() {
		return nil
	}
	confDir, err := os.MkdirTemp("", "cnibench-conf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(confDir)
	if err := os.WriteFile(filepath.Join(confDir, "benchnet.conflist"), drv.list.Bytes, 0o644); err != nil {
		return err
	}
	err = a.s.host.Do(func() error {
		cmd := exec.Command(a.arr.build.bin, flags...)
		cmd.Env = append(os.Environ(), "NETCONFPATH="+confDir, "CNI_PATH="+a.s.pluginDir, "CNI_CACHE_DIR="+a.s.tmp+"/cache")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		took = time.Since(start)
		if err != nil {
			return fmt.Errorf("cni gc: %v: %s", err, out.String())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", a.name(), err)
	}
	b.recordFor(a.arr.build, "scale", fmt.Sprintf("cni gc exec'd, %s, %d cached, all valid", a.arr.describe(), n), timing.Ms(took), "ms", "one run")
	return nil
}
