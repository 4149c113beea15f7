package dhcp_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/reftest"
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

	_, err := w.bridgeCmd("CHECK", c, withPrev(t, conf, res), "")
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

	out, err = execIPAM(t, w.lab.Host, bin, "CHECK", c, withPrevJSON(t, conf, out))
	require.NoError(t, err, out)
	out, err = execIPAM(t, w.lab.Host, bin, "DEL", c, conf)
	require.NoError(t, err, out)
	_, ok = w.lab.WaitLease(c.clientID(), 5*time.Second, func(_ dhcptest.Lease, ok bool) bool { return !ok })
	assert.False(t, ok, "our daemon released the lease on the reference plugin's DEL")
	assert.Empty(t, w.heldFiles())
}

func withPrevJSON(t *testing.T, conf []byte, prev string) []byte {
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	c["prevResult"] = json.RawMessage(prev)
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}
