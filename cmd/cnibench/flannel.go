package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/testns"
	"github.com/cnikit/cni/internal/timing"
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
// present, ours and (with -ref holding a flannel binary) the reference's, in one run.
func (b *bench) flannel() error {
	runs := []struct {
		label string
		dir   func() (string, error)
	}{{"ours", func() (string, error) { return linkDir(b.bin, flannelPlugins...) }}}
	if b.ref != "" {
		if _, err := os.Stat(filepath.Join(b.ref, "flannel")); err == nil {
			runs = append(runs, struct {
				label string
				dir   func() (string, error)
			}{"reference", func() (string, error) {
				return linkEach(func(n string) string { return filepath.Join(b.ref, n) }, refFlannelPlugins...)
			}})
		}
	}
	medians := map[string][2]float64{}
	for _, r := range runs {
		dir, err := r.dir()
		if err != nil {
			return err
		}
		add, del, err := b.measureFlannel(dir)
		os.RemoveAll(dir)
		if err != nil {
			return fmt.Errorf("%s: %w", r.label, err)
		}
		medians[r.label] = [2]float64{timing.MedianMs(add), timing.MedianMs(del)}
		b.record("flannel", "ADD flannel+portmap via libcni, "+r.label, medians[r.label][0], "ms", "10 pods present")
		b.record("flannel", "DEL flannel+portmap via libcni, "+r.label, medians[r.label][1], "ms", "10 pods present")
	}
	if ref, ok := medians["reference"]; ok {
		ours := medians["ours"]
		b.record("flannel", "ADD ours / reference", ours[0]/ref[0], "ratio", "")
		b.target("<= 0.3")
		b.record("flannel", "DEL ours / reference", ours[1]/ref[1], "ratio", "")
		b.target("<= 0.3")
	}
	return nil
}

func (b *bench) measureFlannel(pluginDir string) (add, del []time.Duration, err error) {
	host, err := testns.Create()
	if err != nil {
		return nil, nil, err
	}
	defer host.Close()
	tmp, err := os.MkdirTemp("", "cnibench-flannel-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(tmp+"/subnet.env", []byte(flannelSubnetEnv), 0o644); err != nil {
		return nil, nil, err
	}
	list, err := libcni.ConfListFromBytes(flannelChain(tmp))
	if err != nil {
		return nil, nil, err
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, tmp+"/cache", nil)
	const present = 10
	measured := b.iterations(30)
	pods, err := newPods("fl", 0, present+measured)
	if err != nil {
		return nil, nil, err
	}
	defer closePods(pods)
	rt := func(p pod) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: p.id, NetNS: p.ns.Path, IfName: "eth0", CapabilityArgs: map[string]any{
			"portMappings": []map[string]any{{"hostPort": 20000 + p.i, "containerPort": 80, "protocol": "tcp"}}}}
	}
	ctx := context.Background()
	err = host.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			return err
		}
		for i, p := range pods {
			start := time.Now()
			if _, err := cni.AddNetworkList(ctx, list, rt(p)); err != nil {
				return err
			}
			if i >= present {
				add = append(add, time.Since(start))
			}
		}
		for i, p := range pods {
			start := time.Now()
			if err := cni.DelNetworkList(ctx, list, rt(p)); err != nil {
				return err
			}
			if i < measured {
				del = append(del, time.Since(start))
			}
		}
		return nil
	})
	return add, del, err
}
