package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// macvlanPlugins are what one macvlan attachment execs.
var macvlanPlugins = []string{"macvlan", "host-local"}

// macvlanConf is a macvlan attachment on the bench master with host-local addresses.
func macvlanConf(dataDir string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"mvbench","type":"macvlan","master":"mvbench0",
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.97.0.0/16"}]]}}`, dataDir))
}

// macvlan measures exec'd macvlan+host-local ADD and DEL, the way a runtime runs them,
// for every build in the same harness. The builds take turns operation by operation, so
// that a change in the machine's load during the run weighs on all alike.
func (b *bench) macvlan() error {
	builds := b.allBuilds("macvlan", macvlanPlugins...)
	n := b.iterations(40)
	var runs []*macvlanRun
	for _, bd := range builds {
		dir, err := bd.pluginDir(macvlanPlugins...)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		r, err := newMacvlanRun(dir, bd.label, n+5)
		if err != nil {
			return err
		}
		defer r.close()
		runs = append(runs, r)
	}
	add, del := make([][]time.Duration, len(runs)), make([][]time.Duration, len(runs))
	for _, op := range []struct {
		cmd string
		out [][]time.Duration
	}{{"ADD", add}, {"DEL", del}} {
		for i := range n + 5 {
			for _, k := range rotated(indexes(len(runs)), i) {
				d, err := runs[k].exec(op.cmd, i)
				if err != nil {
					return fmt.Errorf("%s: %w", builds[k].label, err)
				}
				if i >= 5 { // warm-up runs are not counted
					op.out[k] = append(op.out[k], d)
				}
			}
		}
	}
	for k, bd := range builds {
		b.recordFor(bd, "macvlan", "ADD exec'd, macvlan+host-local", timing.MedianMs(add[k]), "ms", "")
		if bd.label == labelOurs && b.ref != "" {
			b.target("ours/ref <= 0.5")
		}
		b.recordFor(bd, "macvlan", "DEL exec'd, macvlan+host-local", timing.MedianMs(del[k]), "ms", "")
		if bd.label == labelOurs && b.ref != "" {
			b.target("ours/ref <= 0.5")
		}
	}
	return nil
}

// macvlanRun is one candidate's host namespace, whose master is a veth end, with its
// pods and IPAM data dir.
type macvlanRun struct {
	host *testns.NS
	pods []pod
	tmp  string
	dir  string
}

func newMacvlanRun(pluginDir, label string, pods int) (*macvlanRun, error) {
	host, err := testns.Create()
	if err != nil {
		return nil, err
	}
	r := &macvlanRun{host: host, dir: pluginDir}
	if r.tmp, err = os.MkdirTemp("", "cnibench-macvlan-"); err != nil {
		r.close()
		return nil, err
	}
	if r.pods, err = newPods("mv-"+label, 0, pods); err != nil {
		r.close()
		return nil, err
	}
	if err := host.Do(func() error { return benchMaster("mvbench0") }); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// exec runs one exec'd command for pod i inside the run's host namespace and times it.
func (r *macvlanRun) exec(cmd string, i int) (time.Duration, error) {
	p := r.pods[i]
	a := skel.Args{Command: cmd, ContainerID: p.id, Netns: p.ns.Path, IfName: "eth0", Path: []string{r.dir}, Env: os.Environ()}
	var d time.Duration
	err := r.host.Do(func() error {
		start := time.Now()
		err := runPlugin(filepath.Join(r.dir, "macvlan"), a, macvlanConf(r.tmp))
		d = time.Since(start)
		return err
	})
	return d, err
}

func (r *macvlanRun) close() {
	closePods(r.pods)
	r.host.Close()
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

// benchMaster makes a veth pair in the calling thread's namespace and sets both ends up;
// name is the end macvlans hang off.
func benchMaster(name string) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("master %s: %w", name, err)
	}
	for _, n := range []string{name, name + "p"} {
		l, err := netlink.LinkByName(n)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}
