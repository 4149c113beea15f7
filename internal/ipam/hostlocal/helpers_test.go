package hostlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// network is a test network config with a data dir of its own.
type network struct {
	t       *testing.T
	dataDir string
	name    string
	version string
	ipam    map[string]any
	extra   map[string]any
}

func newNetwork(t *testing.T, ipam map[string]any) *network {
	t.Helper()
	n := &network{t: t, dataDir: t.TempDir(), name: "testnet", version: "1.1.0", ipam: map[string]any{}, extra: map[string]any{}}
	for k, v := range ipam {
		n.ipam[k] = v
	}
	n.ipam["type"] = "host-local"
	if _, ok := ipam["dataDir"]; !ok {
		n.ipam["dataDir"] = n.dataDir
	}
	return n
}

func (n *network) dir() string { return filepath.Join(n.dataDir, n.name) }

func (n *network) config() []byte {
	m := map[string]any{"cniVersion": n.version, "name": n.name, "type": "bridge", "ipam": n.ipam}
	for k, v := range n.extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(n.t, err)
	return b
}

func (n *network) invoke(cmd, id, ifname, cniArgs string) (*result.Result, string, error) {
	var stderr bytes.Buffer
	args := skel.Args{Command: cmd, ContainerID: id, IfName: ifname, Netns: "/proc/nonexistent/ns/net",
		CNIArgs: cniArgs, Path: []string{"/nonexistent"}}
	res, err := skel.Invoke(context.Background(), Plugin(), args, n.config(), &stderr)
	return res, stderr.String(), err
}

func (n *network) add(id, ifname string) (*result.Result, error) {
	res, _, err := n.invoke(skel.CmdAdd, id, ifname, "")
	return res, err
}

func (n *network) mustAdd(id, ifname string) *result.Result {
	n.t.Helper()
	res, err := n.add(id, ifname)
	require.NoError(n.t, err)
	return res
}

func (n *network) del(id, ifname string) error {
	_, _, err := n.invoke(skel.CmdDel, id, ifname, "")
	return err
}

// addrs returns the result's addresses as text, e.g. "10.1.0.2/24".
func addrs(res *result.Result) []string {
	var out []string
	for _, ip := range res.IPs {
		out = append(out, ip.Address.String())
	}
	return out
}

// reservations lists the reservation files of the network as ip -> content.
func (n *network) reservations() map[string]string {
	n.t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(n.dir())
	if os.IsNotExist(err) {
		return out
	}
	require.NoError(n.t, err)
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n.dir(), e.Name()))
		require.NoError(n.t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// writeReference writes a file into the network dir as the reference plugin would.
func (n *network) writeReference(name, content string) {
	n.t.Helper()
	require.NoError(n.t, os.MkdirAll(n.dir(), 0o755))
	require.NoError(n.t, os.WriteFile(filepath.Join(n.dir(), name), []byte(content), 0o600))
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String names an attachment in the tests' messages.
func (a attachment) String() string {
	if a.IfName == "" {
		return a.ID
	}
	return a.ID + "/" + a.IfName
}
