package portmap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules runs, with each iptables
// flavour, on a host whose nat table holds kube-proxy's rules for 200 Services (its
// jumps first in PREROUTING, OUTPUT and POSTROUTING), ADD of two attachments, CHECK, a
// repeated ADD, GC of one and DEL of the other: none runs iptables-save, none lists or
// asks about a chain but the layout's own, and the built-in chains are only asked
// about our jumps (-C), never listed. The mappings answer beside kube-proxy's rules,
// and what is left is kube-proxy's rules as they were, with our shared chains.
func TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			e := newEnv(t)
			testns.LoadKubeProxyRules(t, e.host, fl.Tool("iptables-restore"), 200)
			listing := func() string {
				out, err := e.host.Exec(t, fl.Tool("iptables"), "-t", "nat", "-S")
				require.NoError(t, err, out)
				return out
			}
			kube := listing()
			bk := map[string]any{"backend": "iptables"}
			a, confA := e.mapped(t, "ctr-a", bk, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
				{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"}})
			b, confB := e.mapped(t, "ctr-b", bk, []PortMapping{{HostPort: 8091, ContainerPort: tcpPort, Protocol: "tcp"}})
			ours := map[string]bool{iptDNAT: true, iptSetMark: true, iptMasq: true}
			for _, c := range []*container{a, b} {
				h := attachment{net: "net1", cid: c.id}.hash()
				ours[iptDNPrefix+h], ours[iptSNPrefix+h] = true, true
			}
			own := func(table, op, chain string) bool {
				builtin := chain == "PREROUTING" || chain == "OUTPUT" || chain == "POSTROUTING"
				return table == "nat" && (ours[chain] || builtin && op == "-C")
			}
			log := testns.LogIPTables(t, fl.Dir)

			require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
			runs := log.RequireOwnReads(t, "ADD", own)
			assert.NotEmpty(t, runs, "the log sees the tools run")
			require.NoError(t, e.invoke(skel.CmdAdd, b, confB))
			log.RequireOwnReads(t, "ADD of another", own)
			for addr, want := range map[string]string{"10.77.0.1:8080": "ctr-a", "[fd77::1]:8080": "ctr-a", "10.77.0.1:8091": "ctr-b"} {
				got, err := dialTCP(e.client, addr)
				if assert.NoError(t, err, addr) {
					assert.Equal(t, want, got, addr)
				}
			}
			got, err := dialUDP(e.client, "10.77.0.1:8081")
			if assert.NoError(t, err) {
				assert.Equal(t, "ctr-a", got)
			}
			require.NoError(t, e.invoke(skel.CmdCheck, a, confA))
			log.RequireOwnReads(t, "CHECK", own)
			before := listing()
			require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
			log.RequireOwnReads(t, "a repeated ADD", own)
			assert.Equal(t, before, listing(), "a repeated ADD changes nothing")

			gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap","cni.dev/valid-attachments":[{"containerID":"ctr-a","ifname":"eth0"}]}`)
			require.NoError(t, e.invoke(skel.CmdGC, a, gcConf))
			log.RequireOwnReads(t, "GC", own)
			_, err = dialTCP(e.client, "10.77.0.1:8091")
			assert.Error(t, err, "GC closed the stale attachment's port")
			require.NoError(t, e.invoke(skel.CmdDel, a, []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
			log.RequireOwnReads(t, "DEL", own)

			after := listing()
			for _, line := range strings.Split(strings.TrimSpace(kube), "\n") {
				assert.Contains(t, after, line+"\n")
			}
			assert.NotContains(t, after, iptDNPrefix)
			assert.NotContains(t, after, "ctr-")
			_, err = dialTCP(e.client, "10.77.0.1:8080")
			assert.Error(t, err, "the host port is closed after DEL")
		})
	}
}

// TestDelSucceedsWhenSomethingElseJumpsToTheAttachmentsChain: a DEL looks for the
// jumps to an attachment's CNI-DN chain where the layout puts them (CNI-HOSTPORT-DNAT),
// not in every chain of the table. A jump an operator added elsewhere would keep the
// chain in use and fail the DEL at every retry: one from a built-in chain is then
// found and deleted with the chain; one from a chain of the operator's leaves the
// chain flushed, mapping nothing. Either way the DEL succeeds and the port closes.
func TestDelSucceedsWhenSomethingElseJumpsToTheAttachmentsChain(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the stray jumps are written with iptables")
	for name, stray := range map[string]struct {
		chain      string
		chainStays bool
	}{"from PREROUTING": {"PREROUTING", false}, "from a chain of the operator's": {"OPERATOR", true}} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": "iptables"}, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
			require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
			dn := iptDNPrefix + attachment{net: "net1", cid: c.id}.hash()
			out, err := e.host.ExecInput(t, "*nat\n-N OPERATOR\n-A "+stray.chain+" -p udp -m udp --dport 9999 -j "+dn+"\nCOMMIT\n", "iptables-restore", "--noflush", "-w")
			require.NoError(t, err, out)

			require.NoError(t, e.invoke(skel.CmdDel, c, []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
			_, err = dialTCP(e.client, "10.77.0.1:8080")
			assert.Error(t, err, "the host port is closed after DEL")
			out, err = e.host.Exec(t, "iptables", "-t", "nat", "-S")
			require.NoError(t, err, out)
			assert.NotContains(t, out, "ctr-a", "no entry of the attachment")
			assert.NotContains(t, out, "-A "+dn+" ", "the chain maps nothing")
			if stray.chainStays {
				assert.Contains(t, out, "-N "+dn+"\n")
				assert.Contains(t, out, "-A OPERATOR -p udp -m udp --dport 9999 -j "+dn, "the operator's rule stays")
			} else {
				assert.NotContains(t, out, dn)
			}
		})
	}
}
