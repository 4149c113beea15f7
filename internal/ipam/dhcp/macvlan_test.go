package dhcp_test

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestMacvlanDualStackPodKeepsBothLeasesAcrossARestart is the pod of issue 27, run the
// way a runtime runs it: libcni execs the binary as macvlan (master: the lab's LAN),
// which delegates to dhcp with both families. The pod gets an address of each from
// dnsmasq, keeps both when the daemon restarts (CHECK passes, the server's leases were
// confirmed), and DEL releases both at the server.
func TestMacvlanDualStackPodKeepsBothLeasesAcrossARestart(t *testing.T) {
	w := newWorld(t, dhcptest.Options{IPv6: true})
	dir := testns.LinkPluginDir(t, "macvlan", "dhcp")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"dhcpnet","plugins":[{"type":"macvlan","master":"` +
		dhcptest.Bridge + `","mode":"bridge","ipam":{"type":"dhcp","ipv6":true,"daemonSocketPath":"` + w.daemon.Socket + `"}}]}`))
	require.NoError(t, err)
	c := w.newCtr()
	rt := &libcni.RuntimeConf{ContainerID: c.id, NetNS: c.ns.Path, IfName: "eth0"}
	ctx := context.Background()
	var r *types100.Result
	w.lab.Host.Run(t, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		require.NoError(t, err)
		r, err = types100.GetResult(res)
		return err
	})
	require.Len(t, r.IPs, 2, "an address of each family: %v", r.IPs)
	var got []string
	for _, ip := range r.IPs {
		got = append(got, ip.Address.String())
	}
	assert.ElementsMatch(t, got, pt.AddrsIn(t, c.ns, "eth0"), "both are on the pod's macvlan")
	le4, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	le6, ok := w.lab.Lease6Of(c.duid())
	require.True(t, ok)
	assert.ElementsMatch(t, []string{le4.IP + "/24", le6.IP + "/128"}, got)

	w.restartDaemon()
	after4, after6 := w.lab.Extended(c.clientID(), le4.Expiry), w.lab.Extended6(c.duid(), le6.Expiry)
	assert.True(t, after4.Expiry.After(le4.Expiry) && after6.Expiry.After(le6.Expiry), "the restarted daemon confirmed both")
	assert.ElementsMatch(t, got, pt.AddrsIn(t, c.ns, "eth0"), "the pod keeps both addresses")

	w.lab.Host.Run(t, func() error {
		require.NoError(t, cni.CheckNetworkList(ctx, list, rt))
		require.NoError(t, cni.DelNetworkList(ctx, list, rt))
		return nil
	})
	assert.True(t, w.lab.Released(c.clientID()), "DEL released the DHCPv4 lease")
	assert.True(t, w.lab.Released6(c.duid()), "DEL released the DHCPv6 lease")
	assert.Empty(t, w.heldFiles())
}
