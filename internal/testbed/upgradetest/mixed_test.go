package upgradetest_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/plugins/firewall/firewalldtest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestAConflistMixingBothPluginSetsIsAdopted is a node where only some binaries were
// replaced when the pod was set up: libcni's CNI_PATH lists a dir holding a few of
// ours before the reference's dir, so one conflist runs plugins of both. Ours CHECK
// and DEL the pod, and nothing of it is left.
func TestAConflistMixingBothPluginSetsIsAdopted(t *testing.T) {
	for name, ours := range map[string][]string{
		"our meta plugins":  {"firewall", "tuning", "bandwidth"},
		"our main plugins":  {"bridge", "host-local"},
		"our portmap alone": {"portmap"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			rt := runtimes["libcni"](t)
			nw := network{name: "upg", main: "bridge", backend: "nftables"}
			conf := nw.conflist(n)
			p := n.newPod(47000)
			mixed := []string{testns.LinkPluginDir(t, ours...), n.ref}
			require.NoError(t, rt.add(n, mixed, conf, p), "ADD through the mixed CNI_PATH")
			require.NoError(t, rt.check(n, mixed, conf, p), "CHECK through the mixed CNI_PATH")
			require.NoError(t, rt.check(n, []string{n.ours}, conf, p), "our CHECK")
			require.NoError(t, rt.del(n, []string{n.ours}, conf, p), "our DEL")
			assert.Empty(t, n.naming(p, nw))
		})
	}
}

// TestFirewalldZoneMembershipIsAdopted: with firewalld running, the reference's
// firewall plugin binds the pod's addresses to the trusted zone; ours finds firewalld
// too, CHECKs the binding (and fails on an address moved to another zone), and DEL
// unbinds them.
func TestFirewalldZoneMembershipIsAdopted(t *testing.T) {
	bus := firewalldtest.StartPrivateBus(t)
	fw := firewalldtest.Start(t, bus)
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", bus) // the exec'd plugins inherit it
	n := newNode(t)
	rt := runtimes["libcni"](t)
	nw := network{name: "upg", main: "bridge", backend: "iptables", firewalld: true}
	p := adopted(t, n, rt, nw, 47000)
	want := map[string]string{}
	for _, a := range p.ips {
		want[netip.PrefixFrom(a, a.BitLen()).String()] = "trusted"
	}
	require.Equal(t, want, fw.Sources(), "the reference bound the pod's addresses")
	v4 := netip.PrefixFrom(p.ips[0], 32).String()
	fw.Bind(v4, "public")
	assert.ErrorContains(t, rt.check(n, []string{n.ours}, nw.conflist(n), p), `source `+v4+` is in zone "public"`)
	fw.Bind(v4, "trusted")
	require.NoError(t, rt.check(n, []string{n.ours}, nw.conflist(n), p))
	require.NoError(t, rt.del(n, []string{n.ours}, nw.conflist(n), p))
	assert.Empty(t, fw.Sources(), "our DEL unbinds them")
	assert.Empty(t, n.naming(p, nw))
}

// TestReferenceAttachmentsOnIPTablesLegacyAreAdopted: a node whose iptables is the
// legacy flavour (x_tables, per netns); the reference used it, and so do we (Detect
// sees its tables in use).
func TestReferenceAttachmentsOnIPTablesLegacyAreAdopted(t *testing.T) {
	var legacy testns.IPTables
	for _, f := range testns.IPTablesFlavours(t) {
		if f.Name == "legacy" {
			legacy = f
		}
	}
	t.Setenv("PATH", legacy.PATH()) // the plugins' iptables and the listing's
	for name, newRuntime := range runtimes {
		t.Run(name, func(t *testing.T) {
			n := newNode(t)
			rt := newRuntime(t)
			nw := network{name: "upg", main: "bridge"}
			p := adopted(t, n, rt, nw, 47000)
			save, err := n.host.Exec(t, legacy.Tool("iptables-save"), "-t", "nat")
			require.NoError(t, err, save)
			require.Contains(t, save, p.ips[0].String(), "the reference used the legacy tables")
			require.NoError(t, rt.del(n, []string{n.ours}, nw.conflist(n), p))
			assert.Empty(t, n.naming(p, nw))
			nextAdd(t, n, rt, nw, p)
		})
	}
}
