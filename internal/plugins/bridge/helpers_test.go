package bridge_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// world is one test's "host" namespace with a host-local data dir; containers are
// further namespaces attached to it.
type world struct {
	t       testing.TB
	host    *testns.NS
	dataDir string
	path    []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	testns.RequireRoot(t)
	return &world{t: t, host: testns.NewWithLoopback(t), dataDir: t.TempDir(), path: []string{t.TempDir()}}
}

// conf builds a bridge config: a host-local IPv4 range unless ipam is overridden, plus
// the given keys.
func (w *world) conf(keys map[string]any) []byte {
	return pt.Config(w.t, map[string]any{"cniVersion": "1.1.0", "name": "testnet", "type": "bridge", "bridge": "cnibr0",
		"ipam": w.hostLocal("10.77.0.0/24")}, keys)
}

// hostLocal is an ipam section for the world's data dir with the given subnets, one
// range set each.
func (w *world) hostLocal(subnets ...string) map[string]any {
	return pt.HostLocal(w.dataDir, subnets...)
}

// invoke runs the plugin in-process inside the host namespace.
func (w *world) invoke(cmd, cid, netns, ifName string, conf []byte, cniArgs ...string) (*result.Result, error) {
	return pt.Invoke(w.t, w.host, bridge.Plugin(), pt.Call{Command: cmd, ContainerID: cid, Netns: netns, IfName: ifName,
		Path: strings.Join(w.path, ":"), Args: strings.Join(cniArgs, ";"), Config: conf})
}

// container is one attached container namespace.
type container struct {
	ns  *testns.NS
	id  string
	res *result.Result
}

var containerSeq atomic.Int64

// add attaches a new container with conf and fails the test if ADD fails.
func (w *world) add(conf []byte, cniArgs ...string) *container {
	w.t.Helper()
	c := &container{ns: testns.NewWithLoopback(w.t), id: fmt.Sprintf("ctr-%d", containerSeq.Add(1))}
	res, err := w.invoke("ADD", c.id, c.ns.Path, "eth0", conf, cniArgs...)
	require.NoError(w.t, err)
	c.res = res
	return c
}

func (w *world) del(c *container, conf []byte) error {
	_, err := w.invoke("DEL", c.id, c.ns.Path, "eth0", conf)
	return err
}

func (w *world) check(c *container, conf []byte) error {
	_, err := w.invoke("CHECK", c.id, c.ns.Path, "eth0", pt.WithPrev(w.t, conf, c.res))
	return err
}

// ping sends echo requests from inside from, one a second, until a reply comes or 5 s
// have passed; it reports whether a reply came. One request right after ADD can go
// unanswered on a loaded machine (the bridge port still settling), which is no fault.
func ping(t testing.TB, from *testns.NS, addr string) error {
	out, err := from.Exec(t, "ping", "-c1", "-w5", addr)
	if err != nil {
		return fmt.Errorf("ping %s: %v: %s", addr, err, out)
	}
	return nil
}

// hostLinks returns the names of the links in the host namespace.
func (w *world) hostLinks() []string { return pt.Links(w.t, w.host) }

func hostVeths(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "veth") {
			out = append(out, n)
		}
	}
	return out
}

// reservations lists host-local's reservation files for the test network.
func (w *world) reservations() []string {
	return pt.Reservations(w.t, filepath.Join(w.dataDir, "testnet"))
}

// linkIn returns the named link inside n, which must exist.
func linkIn(t testing.TB, n *testns.NS, name string) netlink.Link {
	t.Helper()
	l := pt.LinkIn(t, n, name)
	require.NotNil(t, l, "%s exists", name)
	return l
}

// sysctlIn reads a sysctl file inside n.
func sysctlIn(t testing.TB, n *testns.NS, name string) string {
	t.Helper()
	var b []byte
	n.Run(t, func() (err error) { b, err = os.ReadFile("/proc/sys/" + name); return err })
	return strings.TrimSpace(string(b))
}

// code returns the CNI error code of err (0 for nil).
func code(err error) uint { return pt.Code(err) }

// execPlugin runs the cni binary under a plugin name inside the host namespace, the way
// a runtime does.
func (w *world) execPlugin(pluginDir, name, cmd, cid, netns string, conf []byte) (string, error) {
	o := pt.Exec(w.t, w.host, pt.Call{Bin: filepath.Join(pluginDir, name), Command: cmd, ContainerID: cid, Netns: netns,
		IfName: "eth0", Config: conf, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if o.Err != nil {
		return o.Stdout, fmt.Errorf("%s %s: %s", name, cmd, o)
	}
	return o.Stdout, nil
}
