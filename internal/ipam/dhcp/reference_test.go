package dhcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The reference plugins' dhcp binary (reftest builds it at the pinned release) against
// ours, both ways: the wire itself is tested against net/rpc with the reference
// library's types in package wire; these run both real programs against each other.

func TestOurPluginWithTheReferenceDaemon(t *testing.T) {
	bin := reftest.Bin(t, "dhcp")
	lab := dhcptest.New(t, dhcptest.Options{})
	w := &world{t: t, lab: lab, daemon: lab.StartReferenceDaemon(bin)}
	conf := w.conf(nil)
	c := w.newCtr()
	res := w.add(c, conf)
	require.Len(t, res.IPs, 1)
	le, ok := lab.LeaseOf(c.clientID())
	require.True(t, ok, "the reference daemon sent our client id")
	assert.Equal(t, le.IP, res.IPs[0].Address.Addr().String())

	_, err := w.bridgeCmd("CHECK", c, pt.WithPrev(t, conf, res), "")
	assert.NoError(t, err, "CHECK falls back to Allocate, the reference's CHECK")
	assert.NoError(t, w.ipamCmd("STATUS", nil, conf), "the reference daemon answers: it is up")
	assert.NoError(t, w.ipamCmd("GC", nil, conf), "GC does nothing against the reference daemon")
	_, err = w.bridgeCmd("DEL", c, conf, "")
	assert.NoError(t, err)
	_, held := lab.WaitLease(c.clientID(), 3*time.Second, func(_ dhcptest.Lease, ok bool) bool { return !ok })
	t.Logf("after DEL through the reference daemon the server still holds the lease: %v", held)
}

func TestReferencePluginWithOurDaemon(t *testing.T) {
	bin := reftest.Bin(t, "dhcp")
	w := newWorld(t, dhcptest.Options{})
	c := w.newCtr()
	w.lab.Plug(c.ns, "eth0", "refport0")
	conf := ipamOnlyConf(t, w.daemon.Socket)

	out, err := execIPAM(t, w.lab.Host, bin, "ADD", c, conf)
	require.NoError(t, err, out)
	var res struct {
		IPs []struct{ Address, Gateway string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.IPs, 1)
	le, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	assert.Equal(t, le.IP+"/24", res.IPs[0].Address)
	assert.Equal(t, dhcptest.ServerIP, res.IPs[0].Gateway)
	assert.Len(t, w.heldFiles(), 1, "our daemon keeps the reference plugin's lease on disk")

	out, err = execIPAM(t, w.lab.Host, bin, "CHECK", c, pt.WithPrevJSON(t, conf, []byte(out)))
	require.NoError(t, err, out)
	out, err = execIPAM(t, w.lab.Host, bin, "DEL", c, conf)
	require.NoError(t, err, out)
	assert.True(t, w.lab.Released(c.clientID()), "our daemon released the lease on the reference plugin's DEL")
	assert.Empty(t, w.heldFiles())
}

// TestUpgradeFromTheReferenceDaemonTakesOverItsLeases is an in-place upgrade: pods got
// their leases from the reference daemon, which keeps them only in memory; it is stopped
// (it neither renews nor releases them then) and ours starts on its socket. Ours knows
// them only from what the runtime sends: the prevResult of CHECK and DEL. CHECK takes
// the lease over (an INIT-REBOOT for that address with the client id both daemons use)
// and renews it from then on; DEL takes it over and releases it. A DEL without a
// prevResult has nothing to find the lease by: the server keeps it until it expires.
func TestUpgradeFromTheReferenceDaemonTakesOverItsLeases(t *testing.T) {
	lab := dhcptest.New(t, dhcptest.Options{})
	ref := lab.StartReferenceDaemon(reftest.Bin(t, "dhcp"))
	w := &world{t: t, lab: lab, daemon: ref}
	conf := w.conf(nil)
	checked, deleted, blind := w.newCtr(), w.newCtr(), w.newCtr()
	for _, c := range []*ctr{checked, deleted, blind} {
		w.add(c, conf)
	}
	before, ok := lab.LeaseOf(checked.clientID())
	require.True(t, ok)

	dhcptest.PastExpiryGrain()
	ref.Kill()
	w.daemon = lab.StartDaemonOn(ref.Socket, testns.Binary(t))

	_, err := w.bridgeCmd("CHECK", checked, pt.WithPrev(t, conf, checked.res), "")
	require.NoError(t, err, "CHECK of a pod the reference daemon served")
	after, _ := lab.LeaseOf(checked.clientID())
	assert.True(t, after.Expiry.After(before.Expiry), "the lease was confirmed at the server: %v then %v", before.Expiry, after.Expiry)
	assert.Equal(t, before.IP, after.IP)
	assert.Len(t, w.heldFiles(), 1, "and is held (renewed, released on DEL) from now on")

	_, err = w.bridgeCmd("DEL", deleted, pt.WithPrev(t, conf, deleted.res), "")
	require.NoError(t, err)
	assert.True(t, lab.Released(deleted.clientID()), "DEL with the cached result released the reference daemon's lease")

	_, err = w.bridgeCmd("DEL", blind, conf, "")
	require.NoError(t, err, "DEL without a prevResult still succeeds")
	_, ok = lab.LeaseOf(blind.clientID())
	assert.True(t, ok, "without a prevResult the lease cannot be found: it runs out at the server")

	_, err = w.bridgeCmd("DEL", checked, pt.WithPrev(t, conf, checked.res), "")
	require.NoError(t, err)
	assert.True(t, lab.Released(checked.clientID()), "the lease taken over at CHECK is released by DEL")
	assert.Empty(t, w.heldFiles())
}
