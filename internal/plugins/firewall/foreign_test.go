package firewall_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/plugins/firewall/firewalldtest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules runs, with each iptables
// flavour, on a host whose FORWARD drops by policy and whose filter and nat tables hold
// kube-proxy's rules for 200 Services (its jumps in INPUT, FORWARD and OUTPUT), the
// chain bridge + firewall (iptables backend, ingressPolicy same-bridge): ADD of two
// containers, CHECK, a repeated ADD, GC of one and DEL of the other, then the
// firewalld backend's ingress policy (ADD and CHECK), which the node's rules put in
// iptables. None runs iptables-save; the firewall lists only its own chains
// (CNI-FORWARD, the isolation chains, the admin chain where only a listing can tell it
// exists) and asks FORWARD about its jumps (-C), never listing it. Bridge's GC, which
// looks for stale masquerade chains, lists nat's POSTROUTING and nothing else. The
// containers reach the outside past the DROP policy and kube-proxy's rules, and what
// is left is kube-proxy's rules as they were.
func TestIPTablesReadsOnlyItsOwnChainsBesideKubeProxysRules(t *testing.T) {
	testns.RequireRoot(t)
	for i, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			e := newNFTEnv(t)
			for _, tool := range []string{"iptables", "ip6tables"} {
				out, err := e.host.Exec(t, fl.Tool(tool), "-w", "-P", "FORWARD", "DROP")
				require.NoError(t, err, out)
			}
			testns.LoadKubeProxyRules(t, e.host, fl.Tool("iptables-restore"), 200)
			listing := func() string {
				out, err := e.host.Exec(t, fl.Tool("iptables"), "-t", "filter", "-S")
				require.NoError(t, err, out)
				return out
			}
			kube := listing()
			name, bridge := "kube-"+fl.Name, "br-kube"+fl.Name
			n := e.conflist(netOpts{name: name, bridge: bridge, subnets: []string{"10.4" + string(rune('0'+i)) + ".0.0/24"},
				firewall: map[string]any{"backend": "iptables", "ingressPolicy": "same-bridge"}})
			log := testns.LogIPTables(t, fl.Dir)
			own := func(table, op, chain string) bool {
				if table == "nat" {
					return chain == "POSTROUTING" && op == "-S" // bridge's masquerade GC
				}
				switch chain {
				case "CNI-FORWARD", "CNI-ADMIN", "CNI-ISOLATION-STAGE-1", "CNI-ISOLATION-STAGE-2":
					return table == "filter"
				}
				return table == "filter" && chain == "FORWARD" && op == "-C"
			}

			a := e.add(n, "c-a")
			runs := log.RequireOwnReads(t, "ADD", own)
			assert.NotEmpty(t, runs, "the log sees the tools run")
			b := e.add(n, "c-b")
			log.RequireOwnReads(t, "ADD of another", own)
			for _, c := range []*ctr{a, b} {
				got, err := reach(c.ns, extAddr)
				if assert.NoError(t, err, c.id) {
					assert.Equal(t, "ext", got)
				}
			}
			require.NoError(t, e.inHost(func() error { return e.runner.Check(context.Background(), n, a.att) }))
			log.RequireOwnReads(t, "CHECK", own)
			before := listing()
			_, err := e.invoke(skel.CmdAdd, fwConf(t, name, map[string]any{"backend": "iptables", "ingressPolicy": "same-bridge"}, a.res), a)
			require.NoError(t, err)
			log.RequireOwnReads(t, "a repeated ADD", own)
			assert.Equal(t, before, listing(), "a repeated ADD changes nothing")

			require.NoError(t, e.inHost(func() error {
				return e.runner.GC(context.Background(), n, &chain.GCArgs{ValidAttachments: []skel.Attachment{{ContainerID: a.id, IfName: "eth0"}}})
			}))
			log.RequireOwnReads(t, "GC", own)
			assert.NotContains(t, listing(), b.id)
			require.NoError(t, e.inHost(func() error { return e.runner.Del(context.Background(), n, a.att) }))
			log.RequireOwnReads(t, "DEL", own)
			after := listing()
			assert.NotContains(t, after, a.id)
			for _, line := range strings.Split(strings.TrimSpace(kube), "\n") {
				assert.Contains(t, after, line+"\n")
			}

			bus := firewalldtest.StartPrivateBus(t)
			firewalldtest.Start(t, bus)
			c := e.add(e.conflist(netOpts{name: "fwd-" + fl.Name, bridge: "br-fwd" + fl.Name, subnets: []string{"10.5" + string(rune('0'+i)) + ".0.0/24"}}), "c-fwd")
			log.Runs(t)
			conf := fwConf(t, "fwd-"+fl.Name, map[string]any{"ingressPolicy": "same-bridge"}, c.res)
			_, err = e.invoke(skel.CmdAdd, conf, c, "DBUS_SYSTEM_BUS_ADDRESS="+bus)
			require.NoError(t, err)
			log.RequireOwnReads(t, "firewalld ADD", own)
			assert.Contains(t, listing(), "-A CNI-ISOLATION-STAGE-1 -i br-fwd"+fl.Name, "the ingress policy is in iptables")
			_, err = e.invoke(skel.CmdCheck, conf, c, "DBUS_SYSTEM_BUS_ADDRESS="+bus)
			require.NoError(t, err)
			log.RequireOwnReads(t, "firewalld CHECK", own)
		})
	}
}
