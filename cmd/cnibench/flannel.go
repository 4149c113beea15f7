package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// flannelPlugins are the executables a flannel+portmap chain needs: ours runs bridge and
// host-local in-process, the reference flannel execs them.
var (
	flannelPlugins    = []string{"flannel", "portmap"}
	refFlannelPlugins = []string{"flannel", "bridge", "host-local", "portmap"}
)

// flannelChain is k3s's conflist on a node whose daemon leased 10.42.3.0/24, at
// version 0.4.0: the newest the reference flannel binary measured beside ours speaks
// (flannel-io/cni-plugin is not served by the module proxy; containernetworking/plugins
// v0.9.1's meta/flannel, which it was forked from, execs its delegate the same way).
func flannelChain(tmp string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"0.4.0","name":"cbr0","plugins":[
		{"type":"flannel","subnetFile":%q,"dataDir":%q,"ipam":{"dataDir":%q},
		 "delegate":{"hairpinMode":true,"forceAddress":true,"isDefaultGateway":true}},
		{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		tmp+"/subnet.env", tmp+"/flannel", tmp+"/ipam"))
}

const flannelSubnetEnv = "FLANNEL_NETWORK=10.42.0.0/16\nFLANNEL_SUBNET=10.42.3.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"

// flannel measures a pod's ADD and DEL of flannel+portmap through libcni with 10 pods
// present, for every build (the reference when -ref holds a flannel binary), the
// builds taking turns pod by pod, each in a host of its own.
func (b *bench) flannel() error {
	var runs []*flannelRun
	for _, bd := range b.allBuilds("flannel", refFlannelPlugins...) {
		names := flannelPlugins
		if bd.isRef() {
			names = refFlannelPlugins
		}
		dir, err := bd.pluginDir(names...)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		r, err := newFlannelRun(bd, dir, 10, b.iterations(30))
		if err != nil {
			return fmt.Errorf("%s: %w", bd.label, err)
		}
		defer r.close()
		runs = append(runs, r)
	}
	for _, op := range []string{"ADD", "DEL"} {
		for i := range runs[0].measured {
			for _, k := range rotated(indexes(len(runs)), i) {
				if err := runs[k].time(op, i); err != nil {
					return fmt.Errorf("%s %s: %w", runs[k].bd.label, op, err)
				}
			}
		}
	}
	for _, r := range runs {
		b.recordFor(r.bd, "flannel", "ADD flannel+portmap via libcni @10", timing.MedianMs(r.times["ADD"]), "ms", "10 pods present")
		if r.bd.label == labelOurs && b.ref != "" {
			b.target("ours/ref <= 0.3")
		}
		b.recordFor(r.bd, "flannel", "DEL flannel+portmap via libcni @10", timing.MedianMs(r.times["DEL"]), "ms", "10 pods present")
		if r.bd.label == labelOurs && b.ref != "" {
			b.target("ours/ref <= 0.3")
		}
	}
	return nil
}

// flannelRun is one build's host with its resident pods, its measured pods, and the
// times of their operations.
type flannelRun struct {
	bd       build
	host     *testns.NS
	tmp      string
	cni      *libcni.CNIConfig
	list     *libcni.NetworkConfigList
	pods     []pod
	present  int
	measured int
	times    map[string][]time.Duration
}

func newFlannelRun(bd build, pluginDir string, present, measured int) (r *flannelRun, err error) {
	r = &flannelRun{bd: bd, present: present, measured: measured, times: map[string][]time.Duration{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.host, err = testns.Create(); err != nil {
		return nil, err
	}
	if r.tmp, err = os.MkdirTemp("", "cnibench-flannel-"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(r.tmp+"/subnet.env", []byte(flannelSubnetEnv), 0o644); err != nil {
		return nil, err
	}
	if r.list, err = libcni.ConfListFromBytes(flannelChain(r.tmp)); err != nil {
		return nil, err
	}
	r.cni = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, r.tmp+"/cache", nil)
	if r.pods, err = newPods("fl", 0, present+measured); err != nil {
		return nil, err
	}
	ctx := context.Background()
	err = r.host.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			return err
		}
		for _, p := range r.pods[:present] {
			if _, err := r.cni.AddNetworkList(ctx, r.list, r.rt(p)); err != nil {
				return err
			}
		}
		return nil
	})
	return r, err
}

func (r *flannelRun) rt(p pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns.Path, IfName: "eth0", CapabilityArgs: map[string]any{
		"portMappings": []map[string]any{{"hostPort": 20000 + p.i, "containerPort": 80, "protocol": "tcp"}}}}
}

// time runs op for the i-th measured pod.
func (r *flannelRun) time(op string, i int) error {
	p := r.pods[r.present+i]
	return r.host.Do(func() error {
		ctx := context.Background()
		start := time.Now()
		var err error
		if op == "ADD" {
			_, err = r.cni.AddNetworkList(ctx, r.list, r.rt(p))
		} else {
			err = r.cni.DelNetworkList(ctx, r.list, r.rt(p))
		}
		r.times[op] = append(r.times[op], time.Since(start))
		return err
	})
}

func (r *flannelRun) close() {
	closePods(r.pods)
	if r.host != nil {
		r.host.Close()
	}
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}
