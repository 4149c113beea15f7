package dhcp_test

import (
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
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
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
	return pt.Invoke(w.t, w.lab.Host, bridge.Plugin(), pt.Call{Command: cmd, ContainerID: c.id, Netns: c.ns.Path,
		IfName: "eth0", Path: w.t.TempDir(), Args: cniArgs, Config: conf})
}

func (w *world) add(c *ctr, conf []byte) *result.Result {
	w.t.Helper()
	res, err := w.bridgeCmd("ADD", c, conf, "")
	require.NoError(w.t, err)
	c.res = res
	return res
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
	require.DirExists(w.t, w.daemon.StateDir)
	return pt.Entries(w.t, w.daemon.StateDir)
}
