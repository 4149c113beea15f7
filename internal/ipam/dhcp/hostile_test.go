package dhcp_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// editRecord rewrites fields of the kept lease of clientID while the daemon is down, as
// a hand, a bug or a reused path would leave it; a nil value deletes the field.
func (w *world) editRecord(clientID string, fields map[string]any) {
	w.t.Helper()
	path := filepath.Join(w.daemon.StateDir, leasefile.FileName(clientID))
	b, err := os.ReadFile(path)
	require.NoError(w.t, err)
	var rec map[string]any
	require.NoError(w.t, json.Unmarshal(b, &rec))
	for k, v := range fields {
		if v == nil {
			delete(rec, k)
		} else {
			rec[k] = v
		}
	}
	b, err = json.Marshal(rec)
	require.NoError(w.t, err)
	require.NoError(w.t, os.WriteFile(path, b, 0o600))
}

func linkUp(t *testing.T, n *testns.NS, name string) bool {
	l, err := n.Handle(t).LinkByName(name)
	require.NoError(t, err)
	return l.Attrs().Flags&net.FlagUp != 0
}

// TestRestartedDaemonActsOnlyWhereTheLeaseWasBound: a kept lease whose netns path now
// names another namespace (a reused /proc/<pid>/ns/net, a record edited by hand), or the
// daemon's own, is not confirmed there. Before, the restarted daemon sent its INIT-REBOOT
// from that namespace's eth0 and, on the NAK of a server that had forgotten the lease,
// took that eth0 down: someone else's pod, or the host's own NIC.
func TestRestartedDaemonActsOnlyWhereTheLeaseWasBound(t *testing.T) {
	for name, target := range map[string]func(w *world) (*testns.NS, string){
		"another pod's namespace": func(w *world) (*testns.NS, string) {
			victim := w.newCtr()
			w.lab.Plug(victim.ns, "eth0", "victim0")
			return victim.ns, "eth0"
		},
		"the daemon's own namespace": func(w *world) (*testns.NS, string) { return w.lab.Host, "uplink0" },
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, dhcptest.Options{})
			c := w.newCtr()
			w.add(c, w.conf(nil))
			victim, ifName := target(w)
			require.True(t, linkUp(t, victim, ifName))

			w.daemon.Kill()
			w.editRecord(c.clientID(), map[string]any{"netns": victim.Path, "ifName": ifName})
			// A server that forgot every lease: it NAKs any INIT-REBOOT for the old address.
			w.lab.RestartServer(dhcptest.Options{Pool: [2]string{"10.99.0.200", "10.99.0.210"}})
			w.daemon.Start()

			assert.Eventually(t, func() bool { return len(w.heldFiles()) == 0 }, 10*time.Second, 50*time.Millisecond,
				"the record that names another interface is dropped")
			time.Sleep(3 * time.Second) // what an INIT-REBOOT and its NAK would take
			assert.True(t, linkUp(t, victim, ifName), "%s in %s is left alone", ifName, name)
			assert.True(t, linkUp(t, c.ns, "eth0"), "the lease's own interface was not touched either")
		})
	}
}

// TestAllocateInAMissingNetnsIsUnknownContainer: a netns that does not exist is code 3,
// as in every plugin (TestMissingNetnsIsOneCodeForEveryPlugin), not 8, the code of the
// daemon's own namespace; nothing is kept.
func TestAllocateInAMissingNetnsIsUnknownContainer(t *testing.T) {
	w := newWorld(t, dhcptest.Options{}, "-resendtimeout", "2s")
	missing := filepath.Join(t.TempDir(), "gone")
	args := &wire.CmdArgs{ContainerID: "gone", Netns: missing, IfName: "eth0", StdinData: ipamOnlyConf(t, w.daemon.Socket)}
	err := wire.Call(context.Background(), w.daemon.Socket, "DHCP.Allocate", args, &wire.Result{})
	var se wire.ServerError
	require.ErrorAs(t, err, &se)
	ce := se.Err()
	assert.Equal(t, cnierror.CodeUnknownContainer, cnierror.Code(ce), "%v", ce)
	assert.Contains(t, ce.Error(), missing)
	assert.Empty(t, w.heldFiles())
}

// TestAllocateNamingTheDaemonsOwnNetnsIsRefused: the daemon never runs DHCP in its own
// namespace, whoever asks (the reference plugin checks only its own namespace, and a
// plugin may run elsewhere than the daemon): code 8, at once, and nothing kept.
func TestAllocateNamingTheDaemonsOwnNetnsIsRefused(t *testing.T) {
	w := newWorld(t, dhcptest.Options{}, "-resendtimeout", "2s")
	args := &wire.CmdArgs{ContainerID: "own", Netns: w.lab.Host.Path, IfName: "uplink0", StdinData: ipamOnlyConf(t, w.daemon.Socket)}
	err := wire.Call(context.Background(), w.daemon.Socket, "DHCP.Allocate", args, &wire.Result{})
	var se wire.ServerError
	require.ErrorAs(t, err, &se)
	ce := se.Err()
	assert.Equal(t, cnierror.CodeInvalidNetNS, cnierror.Code(ce), "%v", ce)
	assert.True(t, strings.Contains(ce.Error(), "own network namespace"), "%v", ce)
	assert.Empty(t, w.heldFiles())
	_, ok := w.lab.LeaseOf("own/dhcpnet/uplink0")
	assert.False(t, ok, "no DHCP was sent from the daemon's namespace")
}

// readRecord returns the kept lease of clientID as JSON fields.
func (w *world) readRecord(clientID string) map[string]any {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.daemon.StateDir, leasefile.FileName(clientID)))
	require.NoError(w.t, err)
	var rec map[string]any
	require.NoError(w.t, json.Unmarshal(b, &rec))
	return rec
}

// TestARecordOfAnEarlierVersionIsResumedAndGetsItsIdentity: a lease file written
// before the identity was kept (hwAddr alone) is still confirmed after the upgrade, on
// the MAC it names, and is then kept with the boot, namespace and link.
func TestARecordOfAnEarlierVersionIsResumedAndGetsItsIdentity(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	c := w.newCtr()
	w.add(c, w.conf(nil))
	rec := w.readRecord(c.clientID())
	for _, k := range []string{"bootID", "netnsCookie", "netnsDev", "netnsIno", "ifIndex"} {
		assert.Contains(t, rec, k)
	}
	before, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)

	dhcptest.PastExpiryGrain()
	w.daemon.Kill()
	w.editRecord(c.clientID(), map[string]any{"bootID": nil, "netnsCookie": nil, "netnsDev": nil, "netnsIno": nil, "ifIndex": nil})
	w.daemon.Start()
	after := w.lab.Extended(c.clientID(), before.Expiry)
	assert.True(t, after.Expiry.After(before.Expiry), "the old record was confirmed")
	assert.Eventually(t, func() bool { _, ok := w.readRecord(c.clientID())["bootID"]; return ok }, 5*time.Second, 50*time.Millisecond)
	assert.Equal(t, rec["netnsCookie"], w.readRecord(c.clientID())["netnsCookie"])
}
