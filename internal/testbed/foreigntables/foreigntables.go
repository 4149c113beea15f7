// Package foreigntables writes, in a test's network namespace, nf_tables tables that are
// not ours: those kube-proxy keeps on a Kubernetes node in either of its modes, and
// plain tables of any size. The plugins must read nothing of them; the tests that show
// it (a plugin's messages and answers the same beside 1,000 Services as beside 10)
// stand their plugin beside these. They are written over netlink, so they are there
// where no nft or iptables binary is too (testns.FirewallBinariesHidden); the matches
// are reduced to what shows the shape (addresses, jumps, dnat): the cost of reading
// them is in their number.
package foreigntables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// batchObjects bounds the objects (a chain and its rules, a Service's) of one
// transaction: the batch must fit the socket's send buffer, and its acknowledgements
// (each echoing its message) the receive buffer.
const batchObjects = 25

// writer queues objects and sends them in transactions of batchObjects.
type writer struct {
	c      *nftables.Conn
	queued int
}

func (w *writer) queued1() error {
	if w.queued++; w.queued < batchObjects {
		return nil
	}
	w.queued = 0
	return w.c.Flush()
}

// fill runs fn with a writer in n and sends what is left.
func fill(t testing.TB, n *testns.NS, fn func(w *writer) error) {
	t.Helper()
	n.Run(t, func() error {
		c, err := nftables.New(nftables.AsLasting())
		if err != nil {
			return err
		}
		defer c.CloseLasting()
		w := &writer{c: c}
		if err := fn(w); err != nil {
			return err
		}
		return c.Flush()
	})
}

// serviceIP is the i-th Service's cluster address (10.96.0.0/12), endpointIP its one
// endpoint (10.244.0.0/16).
func serviceIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})
}
func endpointIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}) }

// KubeProxyNFT writes what kube-proxy's nftables mode keeps for services Services of
// one endpoint each: table ip kube-proxy with its base chains (nat-prerouting,
// nat-output jumping to services, nat-postrouting to masquerading, the filter ones),
// chain services dispatching through the verdict map service-ips, and per Service a
// service- chain (mark for masquerade, goto the endpoint) and an endpoint- chain
// (dnat); table ip6 kube-proxy empty; and kubelet's KUBE-KUBELET-CANARY chains, which
// iptables-nft puts in tables mangle, nat and filter of both families without any
// built-in chain.
func KubeProxyNFT(t testing.TB, n *testns.NS, services int) {
	t.Helper()
	fill(t, n, func(w *writer) error {
		c := w.c
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "kube-proxy"})
		c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv6, Name: "kube-proxy"})
		serviceIPs := &nftables.Set{Table: tbl, ID: 1, Name: "service-ips", IsMap: true, Concatenation: true,
			KeyType:  nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService),
			DataType: nftables.TypeVerdict}
		if err := c.AddSet(serviceIPs, nil); err != nil {
			return err
		}
		chain := func(name string, rules ...[]expr.Any) (*nftables.Chain, error) {
			ch := c.AddChain(&nftables.Chain{Table: tbl, Name: name})
			for _, r := range rules {
				c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: r})
			}
			return ch, w.queued1()
		}
		if _, err := chain("mark-for-masquerade"); err != nil {
			return err
		}
		if _, err := chain("masquerading", nftexpr.Masquerade()); err != nil {
			return err
		}
		if _, err := chain("services", nftexpr.VMap(serviceIPs, nftexpr.Daddr(false), nftexpr.L4Proto, nftexpr.THDport)); err != nil {
			return err
		}
		for _, b := range []struct {
			name string
			typ  nftables.ChainType
			hook *nftables.ChainHook
			prio *nftables.ChainPriority
			jump string
		}{
			{"nat-prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, "services"},
			{"nat-output", nftables.ChainTypeNAT, nftables.ChainHookOutput, nftables.ChainPriorityNATDest, "services"},
			{"nat-postrouting", nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource, "masquerading"},
			{"filter-forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityRef(-110), ""},
			{"filter-input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityRef(-110), ""},
		} {
			ch := c.AddChain(&nftables.Chain{Table: tbl, Name: b.name, Type: b.typ, Hooknum: b.hook, Priority: b.prio})
			if b.jump != "" {
				c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: nftexpr.Jump(b.jump)})
			}
		}
		for i := range services {
			name := fmt.Sprintf("ns/svc-%d/tcp/http", i)
			ep, err := chain(fmt.Sprintf("endpoint-%08X-%s__%s/8080", i, name, endpointIP(i)),
				nftexpr.Rule(nftexpr.SaddrIn(netip.PrefixFrom(endpointIP(i), 32)), nftexpr.Jump("mark-for-masquerade")),
				nftexpr.DNAT(netip.AddrPortFrom(endpointIP(i), 8080)))
			if err != nil {
				return err
			}
			svc, err := chain(fmt.Sprintf("service-%08X-%s", i, name),
				nftexpr.Rule(nftexpr.DaddrIs(serviceIP(i)), nftexpr.Jump("mark-for-masquerade")),
				nftexpr.Rule(nftexpr.DaddrIs(serviceIP(i)), []expr.Any{nftexpr.GotoTo(ep.Name)}))
			if err != nil {
				return err
			}
			key := nftexpr.Key(serviceIP(i).AsSlice(), []byte{6}, nftexpr.Port(80))
			if err := c.SetAddElements(serviceIPs, []nftables.SetElement{{Key: key, VerdictData: nftexpr.GotoTo(svc.Name)}}); err != nil {
				return err
			}
		}
		for _, fam := range []nftables.TableFamily{nftables.TableFamilyIPv4, nftables.TableFamilyIPv6} {
			for _, name := range []string{"mangle", "nat", "filter"} {
				t := c.AddTable(&nftables.Table{Family: fam, Name: name})
				c.AddChain(&nftables.Chain{Table: t, Name: "KUBE-KUBELET-CANARY"})
			}
		}
		return nil
	})
}

// KubeProxyIPTables writes what kube-proxy's iptables mode keeps for services Services
// of one endpoint each, as iptables-nft stores it: table ip nat, whose built-in chains
// PREROUTING and OUTPUT jump to KUBE-SERVICES and POSTROUTING to KUBE-POSTROUTING,
// KUBE-SERVICES holding a jump per Service to its KUBE-SVC- chain, that one marking
// and jumping to a KUBE-SEP- chain that dnats; and table ip filter, whose FORWARD jumps
// to KUBE-FORWARD (rules of the host's: the backend rule picks iptables there). The
// rules carry kube-proxy's comments as iptables-nft writes them.
func KubeProxyIPTables(t testing.TB, n *testns.NS, services int) {
	t.Helper()
	fill(t, n, func(w *writer) error {
		c := w.c
		nat := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "nat"})
		filter := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"})
		rule := func(t *nftables.Table, ch *nftables.Chain, comment string, exprs []expr.Any) {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs, UserData: userdata.AppendString(nil, userdata.TypeComment, comment)})
		}
		builtin := func(t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook, prio *nftables.ChainPriority) *nftables.Chain {
			accept := nftables.ChainPolicyAccept
			return c.AddChain(&nftables.Chain{Table: t, Name: name, Type: typ, Hooknum: hook, Priority: prio, Policy: &accept})
		}
		kubeServices := c.AddChain(&nftables.Chain{Table: nat, Name: "KUBE-SERVICES"})
		c.AddChain(&nftables.Chain{Table: nat, Name: "KUBE-MARK-MASQ"})
		kubePostrouting := c.AddChain(&nftables.Chain{Table: nat, Name: "KUBE-POSTROUTING"})
		rule(nat, kubePostrouting, "kubernetes service traffic requiring SNAT", nftexpr.Masquerade())
		for _, b := range []struct {
			name string
			hook *nftables.ChainHook
			prio *nftables.ChainPriority
			jump string
		}{
			{"PREROUTING", nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, "KUBE-SERVICES"},
			{"OUTPUT", nftables.ChainHookOutput, nftables.ChainPriorityNATDest, "KUBE-SERVICES"},
			{"POSTROUTING", nftables.ChainHookPostrouting, nftables.ChainPriorityNATSource, "KUBE-POSTROUTING"},
		} {
			rule(nat, builtin(nat, b.name, nftables.ChainTypeNAT, b.hook, b.prio), "kubernetes service portals", nftexpr.Jump(b.jump))
		}
		kubeForward := c.AddChain(&nftables.Chain{Table: filter, Name: "KUBE-FORWARD"})
		rule(filter, kubeForward, "kubernetes forwarding conntrack rule", nftexpr.Rule(nftexpr.CtStateEstablishedRelated(), nftexpr.Accept()))
		rule(filter, builtin(filter, "FORWARD", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter),
			"kubernetes forwarding rules", nftexpr.Jump("KUBE-FORWARD"))
		for i := range services {
			name := fmt.Sprintf("ns/svc-%d:http", i)
			sep := c.AddChain(&nftables.Chain{Table: nat, Name: fmt.Sprintf("KUBE-SEP-%016X", i)})
			rule(nat, sep, name, nftexpr.Rule(nftexpr.SaddrIn(netip.PrefixFrom(endpointIP(i), 32)), nftexpr.Jump("KUBE-MARK-MASQ")))
			rule(nat, sep, name, nftexpr.DNAT(netip.AddrPortFrom(endpointIP(i), 8080)))
			svc := c.AddChain(&nftables.Chain{Table: nat, Name: fmt.Sprintf("KUBE-SVC-%016X", i)})
			rule(nat, svc, name+" cluster IP", nftexpr.Rule(nftexpr.DaddrIs(serviceIP(i)), nftexpr.Jump("KUBE-MARK-MASQ")))
			rule(nat, svc, name+" -> "+endpointIP(i).String()+":8080", nftexpr.Jump(sep.Name))
			rule(nat, kubeServices, name+" cluster IP", nftexpr.Rule(nftexpr.DaddrIs(serviceIP(i)), nftexpr.Jump(svc.Name)))
			if err := w.queued1(); err != nil {
				return err
			}
		}
		return nil
	})
}

// Table writes table name of family with chains regular chains of one rule each
// (`return`): a table of someone else's, as big as a test needs.
func Table(t testing.TB, n *testns.NS, family nftables.TableFamily, name string, chains int) {
	t.Helper()
	fill(t, n, func(w *writer) error {
		tbl := w.c.AddTable(&nftables.Table{Family: family, Name: name})
		for i := range chains {
			ch := w.c.AddChain(&nftables.Chain{Table: tbl, Name: fmt.Sprintf("foreign-%d", i)})
			w.c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: nftexpr.Return()})
			if err := w.queued1(); err != nil {
				return err
			}
		}
		return nil
	})
}
