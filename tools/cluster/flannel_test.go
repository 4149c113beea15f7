//go:build cluster

package cluster_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/cluster"
	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// flannelProfile is the DaemonSet the lab installs: what deploy/kubernetes ships for
// clusters of several nodes.
var flannelProfile = cluster.Profile("cni-flannel.yaml")

// The plugin types of each network config the lab's nodes use, as the CRI reports them
// once it has loaded one.
var (
	oursTypes      = []string{"chain"}
	referenceTypes = []string{"flannel", "portmap", "bandwidth"}
)

// waitNetwork waits until n's CRI has loaded the network cbr0 made of types: containerd
// watches its conf dir and reloads after a write.
func waitNetwork(t *testing.T, n *cluster.Node, types []string) {
	t.Helper()
	waitNetworkNamed(t, n, labNetworkName, types)
}

// waitNetworkNamed is waitNetwork of the network called name.
func waitNetworkNamed(t *testing.T, n *cluster.Node, name string, types []string) {
	t.Helper()
	var last []crinode.Network
	require.Eventually(t, func() bool {
		nets, err := n.CRI.Networks()
		last = nets
		return err == nil && slices.ContainsFunc(nets, func(net crinode.Network) bool {
			return net.Name == name && slices.Equal(net.Types, types)
		})
	}, 30*time.Second, 100*time.Millisecond, "%s: the CRI loads %s of %v; it has %+v", n.Name, name, types, last)
}

// installOurs runs the flannel profile's install step on n with binary and waits for
// the CRI to load its config.
func installOurs(t *testing.T, n *cluster.Node, binary string) string {
	t.Helper()
	out, err := n.RunInstallStep(flannelProfile, binary)
	require.NoError(t, err, "%s: the DaemonSet's install step", n.Name)
	waitNetwork(t, n, oursTypes)
	return out
}

// nodeState is what a node holds that pods leave behind.
type nodeState struct {
	crinode.State
	// FlannelData are the flannel plugin's records of its delegate's config.
	FlannelData []string
}

func stateOf(t *testing.T, n *cluster.Node) nodeState {
	t.Helper()
	s, err := n.State()
	require.NoError(t, err)
	entries, _ := os.ReadDir(n.Path(filepath.Join(cluster.StateDir, "flannel")))
	var data []string
	for _, e := range entries {
		data = append(data, e.Name())
	}
	return nodeState{State: s, FlannelData: data}
}

// warmUp runs a pod with a host port and a bandwidth limit on n and removes it, and
// returns the node's state then: what later pods must leave unchanged (the bridge, the
// plugins' shared chains).
func warmUp(t *testing.T, n *cluster.Node) nodeState {
	t.Helper()
	w := newPod("warm-up-"+n.Name, 31999, "10M")
	w.run(t, n)
	w.stopAndRemove(t)
	return stateOf(t, n)
}

// assertNoPods checks that a state holds nothing of a pod.
func assertNoPods(t *testing.T, n *cluster.Node, s nodeState) {
	t.Helper()
	assert.Empty(t, s.Qdiscs, n.Name)
	assert.Empty(t, s.Reservations, n.Name)
	assert.Empty(t, s.Netns, n.Name)
	assert.Empty(t, s.FlannelData, n.Name)
	assert.Empty(t, s.Cache, n.Name)
}

// requireNothingLeft compares n's state with its baseline: nothing of pods is left,
// and no firewall rule names one of them (their ids, their addresses). sameRules also
// holds the rules equal to the baseline's; a node moved from the reference to ours
// keeps the reference's shared chains beside ours, so there only the first holds.
func requireNothingLeft(t *testing.T, n *cluster.Node, base nodeState, pods []*pod, sameRules bool) {
	t.Helper()
	s := stateOf(t, n)
	assert.Equal(t, base.Links, s.Links, "%s: links", n.Name)
	assert.Empty(t, s.Qdiscs, "%s: qdiscs", n.Name)
	if sameRules {
		assert.Equal(t, base.Rules, s.Rules, "%s: firewall rules", n.Name)
	}
	for _, p := range pods {
		for _, mark := range []string{p.id, p.ip.String() + "/", p.ip.String() + ":", " " + p.ip.String() + " "} {
			assert.NotContains(t, s.Rules, mark, "%s: no rule of %s is left", n.Name, p.Name)
		}
	}
	assert.Empty(t, s.Reservations, "%s: IP reservations", n.Name)
	assert.Empty(t, s.Cache, "%s: libcni cache entries", n.Name)
	assert.Empty(t, s.Netns, "%s: netns files", n.Name)
	assert.Empty(t, s.FlannelData, "%s: flannel's records", n.Name)
	ids, err := n.CRI.Pods()
	require.NoError(t, err)
	assert.Empty(t, ids, "%s: sandboxes", n.Name)
}

// subnets checks that flanneld leased every node its own /24 of the pod network, and
// returns them by node.
func subnets(t *testing.T, lab *cluster.Lab) map[*cluster.Node]netip.Prefix {
	t.Helper()
	out := map[*cluster.Node]netip.Prefix{}
	seen := map[netip.Prefix]string{}
	for _, n := range lab.Nodes {
		s, err := n.Subnet()
		require.NoError(t, err, n.Name)
		assert.True(t, cluster.PodNetwork.Contains(s.Addr()), "%s: %s in the pod network", n.Name, s)
		assert.Equal(t, 24, s.Bits(), n.Name)
		assert.Empty(t, seen[s.Masked()], "%s and %s share %s", seen[s.Masked()], n.Name, s)
		seen[s.Masked()] = n.Name
		out[n] = s.Masked()
	}
	return out
}

// checkTraffic is what a cluster's network must carry, checked over pods spread across
// its nodes: each pod on its node's subnet with flannel's MTU; TCP from every pod to
// every pod of another node, seen with its own address; a full-MTU packet with DF
// across the overlay; a host port reached from another node's pod and from outside;
// masquerading towards the outside only.
func checkTraffic(t *testing.T, lab *cluster.Lab, pods []*pod) {
	t.Helper()
	nets := subnets(t, lab)
	for _, p := range pods {
		assert.True(t, nets[p.node].Contains(p.ip), "%s: %s on %s's subnet %s", p.Name, p.ip, p.node.Name, nets[p.node])
		env, err := p.node.SubnetEnv()
		require.NoError(t, err)
		assert.Equal(t, env["FLANNEL_MTU"], strconv.Itoa(p.mtu(t)), "%s: eth0 has flannel's MTU", p.Name)
	}
	for _, a := range pods {
		for _, b := range pods {
			if a.node != b.node {
				b.reachFrom(t, a)
			}
		}
	}
	// The largest packet the pod's MTU allows, with DF: the overlay carries it whole.
	a, b := pods[0], pods[len(pods)-1]
	require.NotEqual(t, a.node, b.node)
	size := strconv.Itoa(a.mtu(t) - 28)
	_, err := a.inPod("ping", "-c", "1", "-W", "3", "-M", "do", "-s", size, b.ip.String())
	assert.NoError(t, err, "a %s-byte ICMP payload with DF from %s to %s", size, a.Name, b.Name)
	// Outside the cluster network, a pod is its node.
	srv, err := crinode.ServeFunc(lab.Outside.NetNS(), ":9000", func(peer net.Addr) string {
		return "outside " + peer.(*net.TCPAddr).IP.String()
	})
	require.NoError(t, err)
	defer srv.Close()
	for _, p := range pods {
		got := dial(t, p.netns, netip.AddrPortFrom(lab.Outside.Addr, 9000).String())
		assert.Equal(t, []string{"outside", p.node.Addr.String()}, got, "%s reaches the outside as its node", p.Name)
		if len(p.Ports) == 0 {
			continue
		}
		assert.Equal(t, lab.Outside.Addr.String(), p.hostPortFrom(t, lab.Outside.NetNS()), "%s's host port from outside", p.Name)
		for _, q := range pods {
			if q.node != p.node {
				// Towards another node's address the pod leaves the cluster network:
				// its node masquerades it.
				assert.Equal(t, q.node.Addr.String(), p.hostPortFrom(t, q.netns), "%s's host port from %s", p.Name, q.Name)
				break
			}
		}
	}
}

// shaped checks that n holds the tbf of a pod limited to rate (tc's spelling) both ways.
func shaped(t *testing.T, n *cluster.Node, rate string) {
	t.Helper()
	qd, err := n.Qdiscs()
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(qd, "rate "+rate+" "), "%s: a tbf at %s on the pod's veth and on its ifb:\n%s", n.Name, rate, qd)
}

// podTimes are the CRI's times of one arm of the lab.
type podTimes struct{ run, remove []time.Duration }

func (pt *podTimes) add(run, remove time.Duration) {
	pt.run = append(pt.run, run)
	pt.remove = append(pt.remove, remove)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestFlannelCluster runs three kubeadm-shaped nodes under flanneld twice: with the
// reference plugins as flannel's own manifest installs them (the baseline), then with
// ours as the flannel profile's DaemonSet installs them, and prints the CRI's times of
// both side by side.
func TestFlannelCluster(t *testing.T) {
	var ref, ours podTimes
	t.Run("reference", func(t *testing.T) { referenceCluster(t, &ref) })
	t.Run("ours", func(t *testing.T) { oursCluster(t, &ours) })
	fmt.Printf("\nthe flannel lab, three nodes, through containerd's CRI (median of %d and %d pods):\n", len(ours.run), len(ref.run))
	fmt.Printf("  %-28s %12s %12s %8s\n", "", "ours", "reference", "ratio")
	for _, row := range []struct {
		name     string
		ours, re []time.Duration
	}{{"RunPodSandbox", ours.run, ref.run}, {"StopPodSandbox+Remove", ours.remove, ref.remove}} {
		o, r := median(row.ours), median(row.re)
		ratio := 0.0
		if r > 0 {
			ratio = float64(o) / float64(r)
		}
		fmt.Printf("  %-28s %10.1fms %10.1fms %7.2fx\n", row.name, float64(o.Microseconds())/1000, float64(r.Microseconds())/1000, ratio)
	}
	fmt.Println("  (make bench's cluster section measures the same in turn with a host-network pod for the CNI's share)")
}

// referenceCluster is the baseline: every node as flannel's manifest leaves it on a
// kubeadm node, pods on every node, the same traffic, then every pod deleted.
func referenceCluster(t *testing.T, times *podTimes) {
	lab := startLab(t, 3)
	refFlannel := program(t, refFlannelEnv)
	var pods []*pod
	bases := map[*cluster.Node]nodeState{}
	for i, n := range lab.Nodes {
		require.NoError(t, n.InstallReferenceFlannel(refFlannel))
		waitNetwork(t, n, referenceTypes)
		bases[n] = warmUp(t, n)
		assertNoPods(t, n, bases[n])
		for _, p := range []*pod{newPod(fmt.Sprintf("ref-%d-port", i+1), int32(30080+i), ""), newPod(fmt.Sprintf("ref-%d-bw", i+1), 0, "10M")} {
			p.run(t, n)
			pods = append(pods, p)
		}
		shaped(t, n, "10Mbit")
	}
	checkTraffic(t, lab, pods)
	for _, p := range pods {
		times.add(p.took, p.stopAndRemove(t))
	}
	for _, n := range lab.Nodes {
		requireNothingLeft(t, n, bases[n], pods, true)
	}
}

// oursCluster installs ours as the flannel profile does on kubeadm-shaped nodes, one of
// which runs pods on the reference plugins first, and takes the cluster through what a
// cluster lives through: flanneld and containerd restarts, a rollout of a new image, a
// reboot cleaned up by GC; then deletes every pod and takes ours off again.
func oursCluster(t *testing.T, times *podTimes) {
	lab := startLab(t, 3)
	n1, n2, n3 := lab.Nodes[0], lab.Nodes[1], lab.Nodes[2]
	bin := ours(t)
	// node3 runs pods on the reference plugins before it moves to ours.
	require.NoError(t, n3.InstallReferenceFlannel(program(t, refFlannelEnv)))
	waitNetwork(t, n3, referenceTypes)
	found := map[*cluster.Node][2][]string{}
	for _, n := range lab.Nodes {
		found[n] = snapshot(t, n)
	}
	bases := map[*cluster.Node]nodeState{n3: warmUp(t, n3)}
	assertNoPods(t, n3, bases[n3])
	refPods := []*pod{newPod("n3-ref-port", 30082, ""), newPod("n3-ref-bw", 0, "10M")}
	for _, p := range refPods {
		p.run(t, n3)
	}

	// The DaemonSet's install step on a node that holds the reference plugins.
	for _, n := range []*cluster.Node{n1, n2} {
		installOurs(t, n, bin)
		assertOursInstalled(t, n)
		bases[n] = warmUp(t, n)
		assertNoPods(t, n, bases[n])
	}
	pods := []*pod{newPod("n1-port", 30080, ""), newPod("n1-bw", 0, "10M"), newPod("n2-port", 30081, ""), newPod("n2-bw", 0, "10M")}
	for _, p := range pods {
		n := n1
		if strings.HasPrefix(p.Name, "n2") {
			n = n2
		}
		p.run(t, n)
		require.NoError(t, p.check(n), "CHECK of %s", p.Name)
	}
	shaped(t, n1, "10Mbit")
	shaped(t, n2, "10Mbit")

	// node3 moves to ours with the reference's pods running: ours CHECKs them, runs new
	// pods beside them, and deletes them at the end.
	installOurs(t, n3, bin)
	assertOursInstalled(t, n3)
	for _, p := range refPods {
		require.NoError(t, p.check(n3), "CHECK by ours of %s, made by the reference", p.Name)
	}
	p3 := newPod("n3-port", 30083, "")
	p3.run(t, n3)
	pods = append(pods, p3)
	all := append(slices.Clone(pods), refPods...)
	checkTraffic(t, lab, all)

	t.Run("flanneld restarted with pods up", func(t *testing.T) {
		before, err := n1.Subnet()
		require.NoError(t, err)
		require.NoError(t, n1.StopFlanneld())
		require.NoError(t, n1.StartFlanneld())
		after, err := n1.Subnet()
		require.NoError(t, err)
		assert.Equal(t, before, after, "flanneld keeps its lease")
		p := newPod("n1-after-flanneld", 0, "")
		p.run(t, n1)
		pods = append(pods, p)
		checkTraffic(t, lab, []*pod{pods[0], p, pods[2], refPods[0]})
	})

	t.Run("containerd restarted with pods up", func(t *testing.T) {
		require.NoError(t, n2.Restart())
		waitNetwork(t, n2, oursTypes)
		for _, p := range pods {
			if p.node == n2 {
				st, err := n2.CRI.Status(p.id)
				require.NoError(t, err)
				assert.True(t, st.Ready, "%s survives the restart", p.Name)
				require.NoError(t, p.check(n2))
			}
		}
		p := newPod("n2-after-containerd", 0, "")
		p.run(t, n2)
		pods = append(pods, p)
		checkTraffic(t, lab, []*pod{pods[0], pods[2], p})
	})

	t.Run("rolling update to a new image with pods up", func(t *testing.T) {
		next := filepath.Join(t.TempDir(), "cni")
		require.NoError(t, cnibuild.BuildVersion(runtimeArch(), next, "v0.0.0-rollout"))
		for _, n := range lab.Nodes {
			out := installOurs(t, n, next)
			assert.Contains(t, out, "install /host/opt/cni/bin/cni", "%s: the new binary replaces the old", n.Name)
			got, err := n.Run(filepath.Join(cluster.BinDir, "cni"), "version")
			require.NoError(t, err)
			assert.Contains(t, got, "v0.0.0-rollout", n.Name)
		}
		for _, p := range append(slices.Clone(pods), refPods...) {
			assert.NoError(t, p.check(p.node), "CHECK of %s by the new binary", p.Name)
		}
		checkTraffic(t, lab, []*pod{pods[1], pods[3], p3})
	})

	t.Run("a reboot, cleaned up by GC", func(t *testing.T) {
		var gone []*pod
		pods = slices.DeleteFunc(pods, func(p *pod) bool {
			if p.node == n2 {
				gone = append(gone, p)
				return true
			}
			return false
		})
		require.NoError(t, n2.Reboot())
		waitNetwork(t, n2, oursTypes)
		left := stateOf(t, n2)
		assert.Len(t, left.Reservations, len(gone), "the dead pods' addresses are still reserved on disk")
		assert.Len(t, left.FlannelData, len(gone), "and flannel's records of them")
		// The new network namespace holds no bridge or chain yet.
		bases[n2] = warmUp(t, n2)
		p := newPod("n2-after-reboot", 30081, "")
		p.run(t, n2)
		pods = append(pods, p)
		// What the runtime still knows ready is valid, as CRI-O passes it at start-up.
		out, err := n2.Run(filepath.Join(cluster.BinDir, "cni"), "gc", "--conf-dir", cluster.ConfDir, "--valid", p.id+":eth0", labNetworkName)
		require.NoError(t, err, "cni gc: %s", out)
		after := stateOf(t, n2)
		assert.Equal(t, []string{labNetworkName + "/" + p.ip.String()}, after.Reservations, "only the live pod's address stays reserved")
		assert.Equal(t, []string{p.id}, after.FlannelData, "only the live pod's record stays")
		require.NoError(t, p.check(n2), "the live pod still CHECKs after GC")
		// The kubelet then stops and removes the sandboxes that did not survive: their
		// DELs find nothing left to undo.
		for _, g := range gone {
			st, err := n2.CRI.Status(g.id)
			require.NoError(t, err)
			assert.False(t, st.Ready, "%s did not survive the reboot", g.Name)
			g.stopAndRemove(t)
		}
		checkTraffic(t, lab, []*pod{pods[0], p, p3})
	})

	for _, p := range pods {
		if !strings.Contains(p.Name, "after") {
			times.add(p.took, p.stopAndRemove(t))
		} else {
			p.stopAndRemove(t)
		}
	}
	for _, p := range refPods {
		p.stopAndRemove(t)
	}
	deleted := append(slices.Clone(pods), refPods...)
	for _, n := range lab.Nodes {
		requireNothingLeft(t, n, bases[n], deleted, n != n3)
	}

	// cni install --uninstall, as docs/cluster.md tells an operator: the node's plugin
	// and config dirs as they were found.
	for _, n := range lab.Nodes {
		out, err := n.Uninstall()
		require.NoError(t, err, "%s: %s", n.Name, out)
		got := snapshot(t, n)
		assert.Equal(t, found[n][0], got[0], "%s: %s as found", n.Name, cluster.BinDir)
		assert.Equal(t, found[n][1], got[1], "%s: %s as found", n.Name, cluster.ConfDir)
	}
}

// snapshot lists n's /opt/cni/bin and /etc/cni/net.d.
func snapshot(t *testing.T, n *cluster.Node) [2][]string {
	t.Helper()
	bin, err := cluster.Snapshot(n.Disk(cluster.BinDir))
	require.NoError(t, err)
	conf, err := cluster.Snapshot(n.Disk(cluster.ConfDir))
	require.NoError(t, err)
	return [2][]string{bin, conf}
}

// assertOursInstalled checks that every plugin name on n is ours now.
func assertOursInstalled(t *testing.T, n *cluster.Node) {
	t.Helper()
	for _, name := range []string{"bridge", "host-local", "portmap", "bandwidth", "loopback", "flannel", "chain"} {
		target, err := os.Readlink(filepath.Join(n.Disk(cluster.BinDir), name))
		assert.NoError(t, err, "%s: %s is a link", n.Name, name)
		assert.Equal(t, "cni", target, "%s: %s", n.Name, name)
	}
}
