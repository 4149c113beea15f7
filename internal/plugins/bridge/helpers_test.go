package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
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
	c := map[string]any{
		"cniVersion": "1.1.0",
		"name":       "testnet",
		"type":       "bridge",
		"bridge":     "cnibr0",
		"ipam": map[string]any{
			"type":    "host-local",
			"dataDir": w.dataDir,
			"ranges":  []any{[]any{map[string]any{"subnet": "10.77.0.0/24"}}},
		},
	}
	for k, v := range keys {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	b, err := json.Marshal(c)
	require.NoError(w.t, err)
	return b
}

// hostLocal is an ipam section for the world's data dir with the given subnets, one
// range set each.
func (w *world) hostLocal(subnets ...string) map[string]any {
	var ranges []any
	for _, s := range subnets {
		ranges = append(ranges, []any{map[string]any{"subnet": s}})
	}
	return map[string]any{"type": "host-local", "dataDir": w.dataDir, "ranges": ranges}
}

// withPrev returns conf with res as prevResult.
func withPrev(t testing.TB, conf []byte, res *result.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, res.Print(&buf))
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["prevResult"] = json.RawMessage(buf.Bytes())
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// invoke runs the plugin in-process inside the host namespace.
func (w *world) invoke(cmd, cid, netns, ifName string, conf []byte, cniArgs ...string) (*result.Result, error) {
	args := skel.Args{Command: cmd, ContainerID: cid, Netns: netns, IfName: ifName, Path: w.path,
		CNIArgs: strings.Join(cniArgs, ";")}
	var res *result.Result
	var ierr error
	err := w.host.Do(func() error {
		res, ierr = skel.Invoke(context.Background(), bridge.Plugin(), args, conf, os.Stderr)
		return nil
	})
	require.NoError(w.t, err)
	return res, ierr
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
	_, err := w.invoke("CHECK", c.id, c.ns.Path, "eth0", withPrev(w.t, conf, c.res))
	return err
}

// ping sends one echo request from inside from; it reports whether a reply came.
func ping(t testing.TB, from *testns.NS, addr string) error {
	out, err := from.Exec(t, "ping", "-c1", "-W1", addr)
	if err != nil {
		return fmt.Errorf("ping %s: %v: %s", addr, err, out)
	}
	return nil
}

// hostLinks returns the names of the links in the host namespace.
func (w *world) hostLinks() []string {
	links, err := w.host.Handle(w.t).LinkList()
	require.NoError(w.t, err)
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	return names
}

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
	entries, _ := os.ReadDir(filepath.Join(w.dataDir, "testnet"))
	var out []string
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "last_reserved") && !strings.HasPrefix(n, ".") && n != "lock" {
			out = append(out, n)
		}
	}
	return out
}

// linkIn returns the named link inside n.
func linkIn(t testing.TB, n *testns.NS, name string) netlink.Link {
	t.Helper()
	l, err := n.Handle(t).LinkByName(name)
	require.NoError(t, err)
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
func code(err error) uint {
	if err == nil {
		return 0
	}
	return cnierror.From(err).Code
}

// execPlugin runs the cni binary under a plugin name inside the host namespace, the way
// a runtime does.
func (w *world) execPlugin(pluginDir, name, cmd, cid, netns string, conf []byte) (string, error) {
	var out, errb bytes.Buffer
	err := w.host.Do(func() error {
		c := exec.Command(filepath.Join(pluginDir, name))
		c.Env = []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + cid, "CNI_NETNS=" + netns,
			"CNI_IFNAME=eth0", "CNI_PATH=" + pluginDir, "PATH=" + os.Getenv("PATH")}
		c.Stdin = bytes.NewReader(conf)
		c.Stdout, c.Stderr = &out, &errb
		return c.Run()
	})
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s %s", name, cmd, err, out.String(), errb.String())
	}
	return out.String(), nil
}
