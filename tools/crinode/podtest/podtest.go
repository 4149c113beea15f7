// Package podtest holds the pod helpers the CRI end-to-end suites share (tools/e2e on
// containerd, tools/crioe2e on CRI-O, and the pod description of tools/cluster): a pod
// described as kubelet sends it, run and served, reached through its host port, stopped
// and removed, and the node's state held against its baseline. It asserts with testify
// on the caller's *testing.T, so only tests import it; a suite keeps what is its own
// runtime's (its pod namespace, CRI-O's log check) and wraps these.
package podtest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/crinode"
)

// Pod is one pod of a test with what the test expects of it.
type Pod struct {
	crinode.Pod
	// ID is the pod's sandbox id, once it runs.
	ID string
	// Rate is tc's spelling of the shaped rate, "" when not shaped.
	Rate string
}

// Spec describes a pod as kubelet sends it: in namespace, a hostPort (0: none) to its
// port 80 and, when bandwidth is set (e.g. "15M"), both bandwidth annotations.
func Spec(namespace, name string, hostPort int32, bandwidth string) crinode.Pod {
	p := crinode.Pod{Name: name, Namespace: namespace, UID: "uid-" + name}
	if hostPort > 0 {
		p.Ports = []crinode.Port{{HostPort: hostPort, ContainerPort: 80}}
	}
	if bandwidth != "" {
		p.Annotations = map[string]string{"kubernetes.io/ingress-bandwidth": bandwidth, "kubernetes.io/egress-bandwidth": bandwidth}
	}
	return p
}

// New is a pod of Spec, not yet run.
func New(namespace, name string, hostPort int32, bandwidth string) *Pod {
	p := &Pod{Pod: Spec(namespace, name, hostPort, bandwidth)}
	if bandwidth != "" {
		p.Rate = strings.TrimSuffix(bandwidth, "M") + "Mbit"
	}
	return p
}

// Run is RunPodSandbox (on CRI-O: its ADD, then its CHECK), then Serve.
func (p *Pod) Run(t *testing.T, n *crinode.Node) {
	t.Helper()
	id, err := n.CRI.RunPod(p.Pod)
	require.NoError(t, err)
	p.ID = id
	p.Serve(t, n)
}

// Serve checks that the running pod is ready with an address of the network
// (10.88.0.0/16), and starts a server on its port 80 that answers with the pod's name
// until the test ends.
func (p *Pod) Serve(t *testing.T, n *crinode.Node) {
	t.Helper()
	st, err := n.CRI.Status(p.ID)
	require.NoError(t, err)
	require.True(t, st.Ready, "%s is ready", p.Name)
	assert.True(t, strings.HasPrefix(st.IP, "10.88."), "%s: address %q from the network's range", p.Name, st.IP)
	ns, err := n.PodNetNS(st)
	require.NoError(t, err)
	l, err := crinode.Serve(ns, ":80", p.Name)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
}

// IP is the pod's address as the runtime reports it.
func (p *Pod) IP(t *testing.T, n *crinode.Node) string {
	t.Helper()
	st, err := n.CRI.Status(p.ID)
	require.NoError(t, err)
	return st.IP
}

// Reach connects from the peer to the pod's host port on the node's address.
func (p *Pod) Reach(t *testing.T, peer *crinode.Peer) {
	t.Helper()
	addr := fmt.Sprintf("%s:%d", peer.NodeAddr, p.Ports[0].HostPort)
	got, err := crinode.DialTCP(peer.NetNS(), addr, 5*time.Second)
	require.NoError(t, err, "%s through host port %s", p.Name, addr)
	assert.Equal(t, p.Name+"\n", got)
}

// StopAndRemove is StopPodSandbox, then RemovePodSandbox, as kubelet deletes a pod.
func (p *Pod) StopAndRemove(t *testing.T, n *crinode.Node) {
	t.Helper()
	require.NoError(t, n.CRI.StopPod(p.ID))
	require.NoError(t, n.CRI.RemovePod(p.ID))
}

// AfterRestart checks a node whose runtime restarted with pods up: each of them is
// still ready and reached from the peer, and a new pod (in namespace) runs and is
// reached; then every pod is stopped and removed. What they leave is the caller's to
// check.
func AfterRestart(t *testing.T, n *crinode.Node, peer *crinode.Peer, namespace string, pods []*Pod) {
	t.Helper()
	for _, p := range pods {
		st, err := n.CRI.Status(p.ID)
		require.NoError(t, err)
		assert.True(t, st.Ready, "%s survives the restart", p.Name)
		p.Reach(t, peer)
	}
	next := New(namespace, "after", 8092, "15M")
	next.Run(t, n)
	next.Reach(t, peer)
	for _, p := range append(pods, next) {
		p.StopAndRemove(t, n)
	}
}

// ManyAtOnce runs count pods in namespace at once, as kubelet's pod workers do, every
// second one shaped at 50M, each with a host port (9000 up): each must be ready and
// served with an address of its own, and reached from the peer; then it stops and
// removes them all at once. What they leave is the caller's to check.
func ManyAtOnce(t *testing.T, n *crinode.Node, peer *crinode.Peer, namespace string, count int) {
	t.Helper()
	pods := make([]*Pod, count)
	for i := range pods {
		bw := ""
		if i%2 == 0 {
			bw = "50M"
		}
		pods[i] = New(namespace, fmt.Sprintf("many-%d", i), int32(9000+i), bw)
	}
	parallel(t, pods, func(p *Pod) error {
		id, err := n.CRI.RunPod(p.Pod)
		p.ID = id
		return err
	})
	ips := map[string]string{}
	for _, p := range pods {
		p.Serve(t, n)
		ip := p.IP(t, n)
		assert.Empty(t, ips[ip], "%s and %s share %s", ips[ip], p.Name, ip)
		ips[ip] = p.Name
		p.Reach(t, peer)
	}
	parallel(t, pods, func(p *Pod) error {
		if err := n.CRI.StopPod(p.ID); err != nil {
			return err
		}
		return n.CRI.RemovePod(p.ID)
	})
}

// parallel runs fn for every pod at once.
func parallel(t *testing.T, pods []*Pod, fn func(*Pod) error) {
	t.Helper()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// WithPeer gives the running node n a peer namespace on its network (closed when the
// test ends) and takes its Baseline with a warm-up pod in namespace.
func WithPeer(t *testing.T, n *crinode.Node, namespace string) (*crinode.Peer, crinode.State) {
	t.Helper()
	peer, err := n.NewPeer()
	require.NoError(t, err)
	t.Cleanup(peer.Close)
	return peer, Baseline(t, n, namespace)
}

// Baseline runs one pod (in namespace) with a port mapping and a bandwidth limit and
// removes it, and returns the node's state then: what every later pod must leave
// unchanged (a bridge, a peer link, the plugins' empty chains).
func Baseline(t *testing.T, n *crinode.Node, namespace string) crinode.State {
	t.Helper()
	warm := New(namespace, "warm-up", 7000, "10M")
	warm.Run(t, n)
	warm.StopAndRemove(t, n)
	s, err := n.State()
	require.NoError(t, err)
	assert.Empty(t, s.Qdiscs)
	assert.Empty(t, s.Reservations)
	assert.Empty(t, s.Cache)
	assert.Empty(t, s.Netns)
	return s
}

// RequireNothingLeft compares the node's state with the baseline: the same links and
// firewall rules, no qdisc, reservation, cache entry, netns file or sandbox; the
// runtime may still list the sandboxes named in stuck.
func RequireNothingLeft(t *testing.T, n *crinode.Node, base crinode.State, stuck ...string) {
	t.Helper()
	s, err := n.State()
	require.NoError(t, err)
	assert.Equal(t, base.Links, s.Links, "links")
	assert.Empty(t, s.Qdiscs, "qdiscs")
	assert.Equal(t, base.Rules, s.Rules, "firewall rules")
	assert.Empty(t, s.Reservations, "IP reservations")
	assert.Empty(t, s.Cache, "libcni cache entries")
	assert.Empty(t, s.Netns, "netns files")
	ids, err := n.CRI.Pods()
	require.NoError(t, err)
	ids = slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(stuck, id) })
	assert.Empty(t, ids, "sandboxes")
}
