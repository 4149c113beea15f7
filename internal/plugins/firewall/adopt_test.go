package firewall_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// referenceLayout writes what the reference plugin (v1.9) leaves in the filter table
// for the addresses: the jumps and, per address, its two rules without a comment.
func referenceLayout(t *testing.T, e *env, addrs ...string) {
	t.Helper()
	script := "*filter\n:CNI-FORWARD - [0:0]\n:CNI-ADMIN - [0:0]\n" +
		"-I FORWARD 1 -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD\n" +
		"-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN\n"
	for _, a := range addrs {
		script += fmt.Sprintf("-A CNI-FORWARD -d %[1]s/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n-A CNI-FORWARD -s %[1]s/32 -j ACCEPT\n", a)
	}
	out, err := e.host.Exec(t, "sh", "-c", "printf '%s' '"+script+"COMMIT\n' | iptables-restore --noflush -w")
	require.NoError(t, err, out)
}

// TestTheReferencePluginsRulesAreCheckedAndDeleted is a container the reference plugin
// let through before the node's plugins were replaced: CHECK passes on its rules while
// they are intact and fails without one; DEL, given prevResult, removes them and
// leaves another address's.
func TestTheReferencePluginsRulesAreCheckedAndDeleted(t *testing.T) {
	e := newEnv(t)
	c := e.add(e.conflist(netOpts{name: "ref", bridge: "br-ref", subnets: []string{"10.17.0.0/24"}}), "c-ref")
	_, err := dial(c.ns, extAddr)
	require.Error(t, err, "FORWARD drops it before the reference's rules exist")
	referenceLayout(t, e, c.ip4(), "10.17.0.99")
	got, err := dial(c.ns, extAddr)
	require.NoError(t, err, "the reference's rules let it through")
	assert.Equal(t, "ext", got)

	conf := fwConf(t, "ref", iptablesBackend, c.res)
	_, err = e.invoke(skel.CmdCheck, conf, c)
	require.NoError(t, err)

	out, err := e.host.Exec(t, "iptables", "-w", "-D", "CNI-FORWARD", "-s", c.ip4()+"/32", "-j", "ACCEPT")
	require.NoError(t, err, out)
	_, err = e.invoke(skel.CmdCheck, conf, c)
	assert.ErrorContains(t, err, "CNI-FORWARD lacks \"-s "+c.ip4()+"/32 -j ACCEPT\"", "half of the reference's rules is not enough")

	_, err = e.invoke(skel.CmdDel, conf, c)
	require.NoError(t, err)
	save := e.save("iptables")
	assert.NotContains(t, save, c.ip4()+"/32")
	assert.Equal(t, 2, strings.Count(save, "10.17.0.99/32"), "another address's reference rules stay")
	_, err = dial(c.ns, extAddr)
	assert.Error(t, err)
}

// TestUnsetBackendChecksTheReferencesRulesWhereNFTablesHoldsNone: with backend unset
// the rule picks nftables on a node whose only iptables rules are the plugins' own
// (docs/backends.md), yet a pod the reference set up there has its rules in iptables
// (the reference picks iptables whenever it works). CHECK finds them there when
// nftables holds nothing of the attachment, fails naming the rule when one of them is
// missing, and keeps the nftables error when neither backend holds anything.
func TestUnsetBackendChecksTheReferencesRulesWhereNFTablesHoldsNone(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the reference's rules are written with iptables-restore")
	e := newNFTEnv(t)
	c := e.add(e.conflist(netOpts{name: "refauto", bridge: "br-refauto", subnets: []string{"10.18.0.0/24"}}), "c-refauto")
	conf := fwConf(t, "refauto", nil, c.res)
	noBus := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "no-bus")

	_, err := e.invoke(skel.CmdCheck, conf, c, noBus)
	assert.ErrorContains(t, err, "nftables: chain forward missing", "nothing of it anywhere: the chosen backend's error")

	referenceLayout(t, e, c.ip4())
	e.requirePicks(netfilter.NFTables, "with only the plugins' iptables rules")
	_, err = e.invoke(skel.CmdCheck, conf, c, noBus)
	require.NoError(t, err, "the reference's intact rules pass")

	out, err := e.host.Exec(t, "iptables", "-w", "-D", "CNI-FORWARD", "-s", c.ip4()+"/32", "-j", "ACCEPT")
	require.NoError(t, err, out)
	_, err = e.invoke(skel.CmdCheck, conf, c, noBus)
	assert.ErrorContains(t, err, "CNI-FORWARD lacks \"-s "+c.ip4()+"/32 -j ACCEPT\"", "a damaged reference pair is named as such")
}
