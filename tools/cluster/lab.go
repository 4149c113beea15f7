// Package cluster is a Kubernetes-shaped cluster on one machine, for tests and
// benchmarks of what crosses nodes: an underlay switch (a bridge in a network namespace
// of its own), a real etcd, and nodes, each a containerd (package crinode) in network,
// mount and PID namespaces of its own with its own /opt/cni/bin, /etc/cni/net.d,
// /var/lib/cni and /run, running a real flanneld (vxlan) that leases it a subnet of the
// pod network. An "outside" host on the underlay stands for the world beyond the
// cluster. Every process dies with the lab, every namespace with its processes; nothing
// reaches the machine's own network or its /opt, /etc or /var/lib. Nothing here is
// linked into cni.
package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// The lab's addresses: the underlay, where the nodes, etcd and the outside host live,
// and the pod network flanneld leases /24s of.
var (
	Underlay   = netip.MustParsePrefix("192.168.50.0/24")
	PodNetwork = netip.MustParsePrefix("10.244.0.0/16")
	etcdAddr   = netip.MustParseAddr("192.168.50.2")
	outsideIP  = netip.MustParseAddr("192.168.50.100")
)

// nodeAddr is node i's (from 0) underlay address.
func nodeAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 168, 50, byte(11 + i)}) }

// Options describe a lab.
type Options struct {
	// Dir holds everything of the lab: etcd's data, each node's disk and logs. A short
	// path: containerd's socket lives under it.
	Dir string
	// Nodes is how many nodes to start.
	Nodes int
	// Flanneld and Etcd are the daemons' binaries (Etcd: "etcd" on PATH when empty).
	Flanneld, Etcd string
	// Pause and PauseArchive are crinode.BuildPause's outputs.
	Pause, PauseArchive string
	// Prepare lays out a node's disk before it first boots (its /opt/cni/bin, its
	// /etc/cni/net.d): KubeadmNode, say.
	Prepare func(*Node) error
}

// Lab is a running cluster.
type Lab struct {
	o       Options
	sw      *Host
	Etcd    *Etcd
	Outside *Host
	Nodes   []*Node
}

// Start brings the lab up: the switch, etcd with flannel's network config, the outside
// host, then every node (flanneld first, containerd once its subnet is leased).
func Start(o Options) (_ *Lab, err error) {
	if o.Nodes < 1 {
		return nil, errors.New("a lab needs a node")
	}
	if o.Etcd == "" {
		o.Etcd = "etcd"
	}
	// Run inside the nodes' mount namespaces, from another working directory.
	flanneld, err := filepath.Abs(o.Flanneld)
	if err != nil {
		return nil, err
	}
	o.Flanneld = flanneld
	l := &Lab{o: o}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.sw, err = newSwitch(o.Pause); err != nil {
		return nil, fmt.Errorf("underlay switch: %w", err)
	}
	if l.Etcd, err = l.startEtcd(); err != nil {
		return nil, err
	}
	if l.Outside, err = l.newHost("outside", outsideIP); err != nil {
		return nil, err
	}
	for i := range o.Nodes {
		n, err := l.newNode(i)
		if err != nil {
			return nil, err
		}
		l.Nodes = append(l.Nodes, n)
	}
	for _, n := range l.Nodes {
		if err := n.Boot(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// newHost starts a host on the underlay with addr.
func (l *Lab) newHost(name string, addr netip.Addr) (*Host, error) {
	h, err := newHost(name, l.o.Pause)
	if err != nil {
		return nil, err
	}
	h.Addr = addr
	if err := l.sw.attach(h.Pid(), name, addr); err != nil {
		h.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return h, nil
}

// Dir is the lab's directory.
func (l *Lab) Dir() string { return l.o.Dir }

// Close stops every node, etcd and the hosts; the namespaces go with their processes.
// The lab's directory stays: its caller made it and removes it.
func (l *Lab) Close() {
	for _, n := range l.Nodes {
		n.Close()
	}
	if l.Etcd != nil {
		l.Etcd.Close()
	}
	for _, h := range []*Host{l.Outside, l.sw} {
		if h != nil {
			h.Close()
		}
	}
}

func mkdirs(dirs ...string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}

func (l *Lab) path(elem ...string) string {
	return filepath.Join(append([]string{l.o.Dir}, elem...)...)
}
