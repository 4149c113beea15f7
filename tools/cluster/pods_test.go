//go:build cluster

package cluster_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/cluster"
	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/crinode/podtest"
)

// pod is one pod of the lab: its sandbox, where it runs, and a server on its port 80
// that answers "NAME PEER", PEER being the address it sees the caller come from.
type pod struct {
	crinode.Pod
	node  *cluster.Node
	id    string
	ip    netip.Addr
	pid   int    // the sandbox's process, in its node's PID namespace
	netns string // its network namespace, as the machine reaches it
	srv   net.Listener
	// took is how long RunPodSandbox took.
	took time.Duration
}

// newPod describes a pod as kubelet sends it: a hostPort (0: none) to its port 80 and,
// when bandwidth is set, both bandwidth annotations.
func newPod(name string, hostPort int32, bandwidth string) *pod {
	return &pod{Pod: podtest.Spec(labPodsNamespace, name, hostPort, bandwidth)}
}

// run is RunPodSandbox on n, then the pod's address and its server.
func (p *pod) run(t *testing.T, n *cluster.Node) {
	t.Helper()
	p.node = n
	start := time.Now()
	id, err := n.CRI.RunPod(p.Pod)
	p.took = time.Since(start)
	require.NoError(t, err, "%s on %s", p.Name, n.Name)
	p.id = id
	p.attach(t)
}

// attach reads the running pod's status and starts its server.
func (p *pod) attach(t *testing.T) {
	t.Helper()
	st, err := p.node.CRI.Status(p.id)
	require.NoError(t, err)
	require.True(t, st.Ready, "%s is ready", p.Name)
	p.ip, err = netip.ParseAddr(st.IP)
	require.NoError(t, err, "%s's address", p.Name)
	p.pid = st.Pid
	p.netns, err = p.node.PodNetNS(st)
	require.NoError(t, err)
	if p.srv != nil {
		p.srv.Close()
	}
	p.srv, err = crinode.ServeFunc(p.netns, ":80", func(peer net.Addr) string {
		return p.Name + " " + peer.(*net.TCPAddr).IP.String()
	})
	require.NoError(t, err)
	t.Cleanup(func() { p.srv.Close() })
}

// dial connects from the network namespace at netns to addr and returns the answer's
// words.
func dial(t *testing.T, netns, addr string) []string {
	t.Helper()
	var got string
	var err error
	// A route or neighbour a daemon is still installing: a few tries, as a client does.
	for try := 0; try < 5; try++ {
		if got, err = crinode.DialTCP(netns, addr, 3*time.Second); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err, "connect to %s", addr)
	return strings.Fields(got)
}

// reachFrom connects from another pod to p's address and checks that p answers and
// sees that pod's own address: no masquerading inside the cluster's network.
func (p *pod) reachFrom(t *testing.T, from *pod) {
	t.Helper()
	got := dial(t, from.netns, netip.AddrPortFrom(p.ip, 80).String())
	assert.Equal(t, []string{p.Name, from.ip.String()}, got, "%s (%s) to %s (%s)", from.Name, from.node.Name, p.Name, p.node.Name)
}

// hostPortFrom connects from the network namespace at netns to p's host port on its
// node's underlay address and returns the address p saw.
func (p *pod) hostPortFrom(t *testing.T, netns string) string {
	t.Helper()
	require.NotEmpty(t, p.Ports)
	addr := netip.AddrPortFrom(p.node.Addr, uint16(p.Ports[0].HostPort)).String()
	got := dial(t, netns, addr)
	require.Len(t, got, 2, "answer through %s", addr)
	assert.Equal(t, p.Name, got[0], "through %s", addr)
	return got[1]
}

// inPod runs a command in the pod's network namespace.
func (p *pod) inPod(name string, args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + p.netns, "--", name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), p.Name, err, out)
	}
	return string(out), nil
}

// mtu is the MTU of the pod's eth0, as netlink tells it in the pod's namespace (the
// machine's /sys would show the machine's eth0).
func (p *pod) mtu(t *testing.T) int {
	t.Helper()
	out, err := p.inPod("ip", "-o", "link", "show", "dev", "eth0")
	require.NoError(t, err)
	_, after, ok := strings.Cut(out, " mtu ")
	require.True(t, ok, "no mtu in %q", out)
	var mtu int
	_, err = fmt.Sscan(after, &mtu)
	require.NoError(t, err)
	return mtu
}

// check runs CHECK of the pod's attachment with the node's own binary, as a runtime
// that checks (CRI-O after every ADD) runs it: the network the node's config dir
// defines, the pod's netns and id, and the capability args the runtime gave its ADD,
// which libcni's cache holds.
func (p *pod) check(n *cluster.Node) error {
	args := []string{"check", "--conf-dir", cluster.ConfDir, "--container-id", p.id}
	cached, err := os.ReadFile(n.Path(filepath.Join(cluster.StateDir, "results", labNetworkName+"-"+p.id+"-eth0")))
	if err != nil {
		return fmt.Errorf("%s: no cache entry: %w", p.Name, err)
	}
	var entry struct {
		CapabilityArgs json.RawMessage `json:"capabilityArgs"`
	}
	if err := json.Unmarshal(cached, &entry); err != nil {
		return fmt.Errorf("%s: cache entry: %w", p.Name, err)
	}
	if len(entry.CapabilityArgs) > 0 && string(entry.CapabilityArgs) != "null" {
		args = append(args, "--cap-args", string(entry.CapabilityArgs))
	}
	args = append(args, labNetworkName, fmt.Sprintf("/proc/%d/ns/net", p.pid))
	_, err = n.Run(filepath.Join(cluster.BinDir, "cni"), args...)
	return err
}

// stopAndRemove is StopPodSandbox, then RemovePodSandbox, as kubelet deletes a pod.
func (p *pod) stopAndRemove(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, p.node.CRI.StopPod(p.id), "%s", p.Name)
	require.NoError(t, p.node.CRI.RemovePod(p.id), "%s", p.Name)
	return time.Since(start)
}
