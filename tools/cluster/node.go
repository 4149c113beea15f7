package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cnikit/cni/tools/crinode"
)

// The paths of a node's own, as it sees them; each is a directory of the lab's on the
// machine (Node.Disk), which outlives a reboot of the node as a disk does. /run is a
// tmpfs of the node's: a reboot empties it.
const (
	BinDir     = "/opt/cni/bin"
	ConfDir    = "/etc/cni/net.d"
	StateDir   = "/var/lib/cni"
	SubnetFile = "/run/flannel/subnet.env"
)

// Node is one node of the lab: containerd in namespaces of its own, flanneld, and its
// disk.
type Node struct {
	*crinode.Node
	Name string
	// Addr is its underlay address.
	Addr netip.Addr
	lab  *Lab
	dir  string
	// flanneld is the running daemon, nil when stopped.
	flanneld *crinode.Daemon
}

func (l *Lab) newNode(i int) (*Node, error) {
	n := &Node{Name: fmt.Sprintf("node%d", i+1), Addr: nodeAddr(i), lab: l}
	n.dir = l.path(n.Name)
	if err := mkdirs(n.Disk(BinDir), n.Disk(ConfDir), n.Disk(StateDir)); err != nil {
		return nil, err
	}
	if l.o.Prepare != nil {
		if err := l.o.Prepare(n); err != nil {
			return nil, fmt.Errorf("%s: prepare: %w", n.Name, err)
		}
	}
	return n, nil
}

// Disk is the machine's directory that holds the node's path p (one of BinDir,
// ConfDir, StateDir, or below them).
func (n *Node) Disk(p string) string {
	for _, root := range []string{BinDir, ConfDir, StateDir} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return filepath.Join(n.dir, "disk", p)
		}
	}
	panic("not on the node's disk: " + p)
}

// HostPath maps a hostPath volume of a pod on this node to the machine's directory.
func (n *Node) HostPath(p string) (string, error) {
	switch p {
	case BinDir, ConfDir, StateDir:
		return n.Disk(p), nil
	}
	return "", fmt.Errorf("%s: the lab's nodes have no hostPath %s", n.Name, p)
}

// Boot starts the node: its namespaces, its underlay link, flanneld (waiting for its
// subnet), then containerd, whose CNI dirs are the node's own.
func (n *Node) Boot() error {
	var binds []crinode.Bind
	for _, p := range []string{BinDir, ConfDir, StateDir} {
		binds = append(binds, crinode.Bind{Source: n.Disk(p), Target: p})
	}
	cn, err := crinode.Start(crinode.Options{
		Dir: filepath.Join(n.dir, "ctr"), BinDir: BinDir, ConfDir: ConfDir, Binds: binds, KeepRoot: true,
		Pause: n.lab.o.Pause, PauseArchive: n.lab.o.PauseArchive,
		Prepare: func(cn *crinode.Node) error {
			if err := n.lab.sw.attach(cn.Pid(), n.Name, n.Addr); err != nil {
				return err
			}
			n.Node = cn
			return n.StartFlanneld()
		},
	})
	if err != nil {
		n.Node = nil
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	n.Node = cn
	return nil
}

// StartFlanneld runs flanneld as flannel's manifest does, but on etcd (there is no API
// server): the underlay interface, masquerading of what leaves the pod network, the
// subnet file where the flannel plugin reads it. It returns once flanneld has written
// the file, which it does when its lease, routes and rules are in place.
func (n *Node) StartFlanneld() error {
	if n.flanneld != nil {
		return errors.New("flanneld is running")
	}
	// A restarted flanneld finds its file from before: it is ready once it wrote it anew.
	start := time.Now()
	d, err := n.Spawn(filepath.Join(n.dir, "flanneld.log"), n.lab.o.Flanneld,
		"--etcd-endpoints", n.lab.Etcd.Endpoint, "--iface", "eth0", "--ip-masq",
		"--subnet-file", SubnetFile)
	if err != nil {
		return fmt.Errorf("flanneld: %w", err)
	}
	n.flanneld = d
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		fi, err := os.Stat(n.Path(SubnetFile))
		if _, serr := n.Subnet(); err == nil && serr == nil && !fi.ModTime().Before(start) {
			return nil
		}
		if d.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("%s: flanneld wrote no subnet file: %s", n.Name, n.FlanneldLog())
		}
	}
}

// StopFlanneld stops flanneld (SIGTERM, as a rollout of its DaemonSet does).
func (n *Node) StopFlanneld() error {
	if n.flanneld == nil {
		return nil
	}
	err := n.flanneld.Stop()
	n.flanneld = nil
	return err
}

// FlanneldLog is the end of flanneld's log, for failure messages.
func (n *Node) FlanneldLog() string {
	data, _ := os.ReadFile(filepath.Join(n.dir, "flanneld.log"))
	return string(data[max(0, len(data)-4000):])
}

// Subnet is FLANNEL_SUBNET of the node's subnet file: the node's bridge address in the
// /24 flanneld leased it.
func (n *Node) Subnet() (netip.Prefix, error) {
	env, err := n.SubnetEnv()
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.ParsePrefix(env["FLANNEL_SUBNET"])
}

// SubnetEnv is the node's subnet file, key by key.
func (n *Node) SubnetEnv() (map[string]string, error) {
	f, err := os.Open(n.Path(SubnetFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	if env["FLANNEL_SUBNET"] == "" {
		return nil, errors.New("no FLANNEL_SUBNET yet")
	}
	return env, sc.Err()
}

// Reboot is a power cycle: every process of the node dies, its network namespace (its
// links, routes, firewall rules, and the pods' namespaces) and its /run with them; the
// disk stays (the CNI dirs, containerd's root with its sandboxes, now not ready). The
// node boots again as it did at first.
func (n *Node) Reboot() error {
	n.shutdown()
	return n.Boot()
}

func (n *Node) shutdown() {
	n.flanneld = nil // it dies with the node
	if n.Node == nil {
		return
	}
	// Unplugged first: the kernel tears a dead namespace's links down in the
	// background, and a node booting again must find its switch port gone.
	n.lab.sw.Run("ip", "link", "del", "p-"+n.Name)
	n.Node.Close()
	n.Node = nil
}

// Close stops the node.
func (n *Node) Close() { n.shutdown() }
