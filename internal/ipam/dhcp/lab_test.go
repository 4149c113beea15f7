package dhcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
)

// world is a lab with a running daemon, and the bridge plugin with ipam.type dhcp.
type world struct {
	t      testing.TB
	lab    *dhcptest.Lab
	daemon *dhcptest.Daemon
}

func newWorld(t testing.TB, o dhcptest.Options, daemonFlags ...string) *world {
	t.Helper()
	lab := dhcptest.New(t, o)
	return &world{t: t, lab: lab, daemon: lab.StartDaemon(testns.Binary(t), daemonFlags...)}
}

// conf is a bridge config on the lab's bridge with the dhcp IPAM and extra ipam keys.
func (w *world) conf(ipamKeys map[string]any) []byte {
	ipam := map[string]any{"type": "dhcp", "daemonSocketPath": w.daemon.Socket}
	for k, v := range ipamKeys {
		ipam[k] = v
	}
	b, err := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "dhcpnet", "type": "bridge", "bridge": dhcptest.Bridge, "ipam": ipam,
	})
	require.NoError(w.t, err)
	return b
}

var ctrSeq atomic.Int64

type ctr struct {
	ns  *testns.NS
	id  string
	res *result.Result
}

func (c *ctr) clientID() string { return c.id + "/dhcpnet/eth0" }

func (w *world) newCtr() *ctr {
	return &ctr{ns: testns.NewWithLoopback(w.t), id: fmt.Sprintf("dhcp-ctr-%d", ctrSeq.Add(1))}
}

// bridgeCmd runs the bridge plugin in-process in the lab's host namespace.
func (w *world) bridgeCmd(cmd string, c *ctr, conf []byte, cniArgs string) (*result.Result, error) {
	args := skel.Args{Command: cmd, ContainerID: c.id, Netns: c.ns.Path, IfName: "eth0", Path: []string{w.t.TempDir()}, CNIArgs: cniArgs}
	var res *result.Result
	var err error
	w.lab.Host.Run(w.t, func() error {
		res, err = skel.Invoke(context.Background(), bridge.Plugin(), args, conf, os.Stderr)
		return nil
	})
	return res, err
}

func (w *world) add(c *ctr, conf []byte) *result.Result {
	w.t.Helper()
	res, err := w.bridgeCmd("ADD", c, conf, "")
	require.NoError(w.t, err)
	c.res = res
	return res
}

// withPrev returns conf with res as prevResult, for CHECK.
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

// ipamCmd runs the dhcp plugin alone, in-process, as a main plugin would delegate.
func (w *world) ipamCmd(cmd string, c *ctr, conf []byte) error {
	args := skel.Args{Command: cmd, Path: []string{w.t.TempDir()}}
	if c != nil {
		args.ContainerID, args.Netns, args.IfName = c.id, c.ns.Path, "eth0"
	}
	_, err := skel.Invoke(context.Background(), dhcp.Plugin(), args, conf, os.Stderr)
	return err
}

// restartDaemon kills the daemon (as a crash would) and starts it again, once the
// server's expiry of a lease renewed now would differ from the one it holds.
func (w *world) restartDaemon() {
	dhcptest.PastExpiryGrain()
	w.daemon.Kill()
	w.daemon.Start()
}

// heldFiles lists the daemon's lease files.
func (w *world) heldFiles() []string {
	entries, err := os.ReadDir(w.daemon.StateDir)
	require.NoError(w.t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
