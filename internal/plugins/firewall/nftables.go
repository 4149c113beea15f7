package firewall

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/host/owner"
)

// The nftables backend keeps the iptables backend's meaning in a table of its own,
// written over netlink (no nft exec):
//
//	table inet cni_firewall {
//		set ctr4 { type ipv4_addr }               # container addresses, commented "net=<network> id=<containerID>"
//		set ctr6 { type ipv6_addr }
//		set policed { type ifname }               # bridges with ingressPolicy same-bridge or isolated
//		set same_bridge { type ifname . ifname }  # "br" . "br" of each policed bridge
//		set isolated { type ifname . ifname }     # "br" . "br" of each isolated bridge
//		chain forward {
//			type filter hook forward priority filter; policy accept;
//			jump isolation comment "CNI firewall plugin rules (ingressPolicy)"
//			jump CNI-ADMIN comment "CNI firewall plugin admin overrides"
//			ip daddr @ctr4 ct state established,related accept comment "CNI firewall plugin rules"
//			ip saddr @ctr4 accept comment "CNI firewall plugin rules"
//			ip6 daddr @ctr6 ct state established,related accept comment "CNI firewall plugin rules"
//			ip6 saddr @ctr6 accept comment "CNI firewall plugin rules"
//		}
//		chain isolation {
//			iifname . oifname @isolated drop
//			iifname . oifname @same_bridge return
//			iifname @policed oifname @policed drop
//		}
//		chain CNI-ADMIN { }                       # the operator's (iptablesAdminChainName)
//	}
//
// An attachment is its addresses' elements, each commented with its network and
// container id: the iptables backend's two rules per address are the base chain's
// lookups. The admin chain is created empty and never flushed; each admin chain a config
// names gets its jump, in the order they came. Per packet: one set lookup per rule,
// whatever the number of attachments. ADD and CHECK read the base chain (a handful of
// rules) and look each address up once; ADD only adds elements, which costs the same
// with 300 attachments as with 10 (an element that jumps to a chain of its own would
// make the kernel validate every attachment's chain at each ADD). DEL and GC, which have
// no addresses to go by, read the two sets once. The per-bridge elements of the ingress
// policy are shared by the bridge's attachments and stay on DEL, as the iptables
// backend's isolation rules do.
const (
	nftTableName      = "cni_firewall"
	nftForwardChain   = "forward"
	nftIsolationChain = "isolation"
	// nftCommentMax is the longest comment nft shows in full.
	nftCommentMax = 128

	isolationComment = "CNI firewall plugin rules (ingressPolicy)"
)

// nftLayout holds the table's objects; set IDs are fixed per batch (the library's
// package-level ID counter is not safe for concurrent connections).
type nftLayout struct {
	table                         *nftables.Table
	ctr4, ctr6                    *nftables.Set
	policed, sameBridge, isolated *nftables.Set
	forward, isolation            *nftables.Chain
}

func newNFTLayout() *nftLayout {
	t := &nftables.Table{Name: nftTableName, Family: nftables.TableFamilyINet}
	pair := nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIFName)
	return &nftLayout{
		table: t,
		ctr4:  &nftables.Set{Table: t, ID: 1, Name: "ctr4", KeyType: nftables.TypeIPAddr},
		ctr6:  &nftables.Set{Table: t, ID: 2, Name: "ctr6", KeyType: nftables.TypeIP6Addr},
		// Interface names are strings, kept in host byte order: nft prints them as
		// such only when the set says so.
		policed:    &nftables.Set{Table: t, ID: 3, Name: "policed", KeyType: nftables.TypeIFName, KeyByteOrder: binaryutil.NativeEndian},
		sameBridge: &nftables.Set{Table: t, ID: 4, Name: "same_bridge", KeyType: pair, Concatenation: true, KeyByteOrder: binaryutil.NativeEndian},
		isolated:   &nftables.Set{Table: t, ID: 5, Name: "isolated", KeyType: pair, Concatenation: true, KeyByteOrder: binaryutil.NativeEndian},
		forward: &nftables.Chain{Name: nftForwardChain, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter},
		isolation: &nftables.Chain{Name: nftIsolationChain, Table: t},
	}
}

func (l *nftLayout) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: l.table}
}

func (l *nftLayout) addrSet(a netip.Addr) *nftables.Set {
	if a.Is6() {
		return l.ctr6
	}
	return l.ctr4
}

// nftComment is the comment of the attachment's elements.
func (a attachment) nftComment() string {
	return owner.Tag("", a.network, a.containerID, nftCommentMax)
}

func nftUserComment(comment string) []byte {
	return userdata.AppendString(nil, userdata.TypeComment, comment)
}

// isolationJump is `jump isolation comment "CNI firewall plugin rules (ingressPolicy)"`.
func (l *nftLayout) isolationJump() *nftables.Rule {
	return &nftables.Rule{Table: l.table, Chain: l.forward, Exprs: nftexpr.Jump(nftIsolationChain), UserData: nftUserComment(isolationComment)}
}

// adminJump is `jump CNI-ADMIN comment "CNI firewall plugin admin overrides"`.
func (l *nftLayout) adminJump(admin string) *nftables.Rule {
	return &nftables.Rule{Table: l.table, Chain: l.forward, Exprs: nftexpr.Jump(admin), UserData: nftUserComment(adminComment)}
}

// accepts are the base chain's lookups, the reference's two rules per address for every
// attachment at once: `ip daddr @ctr4 ct state established,related accept` (replies to
// the container) and `ip saddr @ctr4 accept` (everything from it), then the same with
// ip6 and @ctr6, each commented "CNI firewall plugin rules".
func (l *nftLayout) accepts() []*nftables.Rule {
	var out []*nftables.Rule
	for i, set := range []*nftables.Set{l.ctr4, l.ctr6} {
		v6 := i == 1
		for _, exprs := range [][]expr.Any{
			nftexpr.Rule(nftexpr.NFProtoIs(v6), nftexpr.InSet(set, nftexpr.Daddr(v6)), nftexpr.CtStateEstablishedRelated(), nftexpr.Accept()),
			nftexpr.Rule(nftexpr.NFProtoIs(v6), nftexpr.InSet(set, nftexpr.Saddr(v6)), nftexpr.Accept()),
		} {
			out = append(out, &nftables.Rule{Table: l.table, Chain: l.forward, Exprs: exprs, UserData: nftUserComment(forwardComment)})
		}
	}
	return out
}

// isolationRules are the isolation chain's: `iifname . oifname @isolated drop` (an
// isolated bridge's own traffic, seen when bridged frames pass netfilter), `iifname .
// oifname @same_bridge return` (a policed bridge's own traffic goes on), `iifname @policed
// oifname @policed drop` (from one policed bridge to another).
func (l *nftLayout) isolationRules() []*nftables.Rule {
	rule := func(exprs ...[]expr.Any) *nftables.Rule {
		return &nftables.Rule{Table: l.table, Chain: l.isolation, Exprs: nftexpr.Rule(exprs...)}
	}
	return []*nftables.Rule{
		rule(nftexpr.InSet(l.isolated, nftexpr.IIFName, nftexpr.OIFName), nftexpr.Drop()),
		rule(nftexpr.InSet(l.sameBridge, nftexpr.IIFName, nftexpr.OIFName), nftexpr.Return()),
		rule(nftexpr.InSet(l.policed, nftexpr.IIFName), nftexpr.InSet(l.policed, nftexpr.OIFName), nftexpr.Drop()),
	}
}

// baseState is what the base chain holds: whether it has the layout's shape, the admin
// chains it jumps to, in order, and the handle of the last jump before the accepts.
type baseState struct {
	table, intact bool
	rules         []*nftables.Rule
	admins        []string
	lastJump      uint64
}

// readBase reads the base chain: one dump when it exists, as on every ADD but a node's
// first. It is intact when it holds the isolation jump, then admin jumps, then the four
// accepts, as the comments tell them.
func (l *nftLayout) readBase(c *nftables.Conn) (baseState, error) {
	rules, err := c.GetRules(l.table, l.forward)
	if err != nil && !netfilter.IsNotExist(err) {
		return baseState{}, fmt.Errorf("firewall: nftables chain %s: %w", nftForwardChain, err)
	}
	st := baseState{table: true, rules: rules}
	if len(rules) == 0 {
		// The kernel lists no rules for a chain or table that does not exist.
		if _, err := c.ListTableOfFamily(l.table.Name, l.table.Family); err != nil {
			return baseState{}, nil
		}
		if _, err := c.ListChain(l.table, nftForwardChain); err != nil {
			return baseState{table: true}, nil
		}
		// Another ADD made the layout between the two reads: read its rules.
		if rules, err = c.GetRules(l.table, l.forward); err != nil {
			return baseState{}, fmt.Errorf("firewall: nftables chain %s: %w", nftForwardChain, err)
		}
		st.rules = rules
	}
	var shape strings.Builder
	for _, r := range rules {
		switch comment, _ := userdata.GetString(r.UserData, userdata.TypeComment); comment {
		case isolationComment:
			shape.WriteByte('i')
			st.lastJump = r.Handle
		case adminComment:
			shape.WriteByte('a')
			st.admins = append(st.admins, nftexpr.VerdictChain(r.Exprs))
			st.lastJump = r.Handle
		case forwardComment:
			shape.WriteByte('d')
		default:
			shape.WriteByte('?')
		}
	}
	st.intact = shape.String() == "i"+strings.Repeat("a", len(st.admins))+"dddd"
	return st, nil
}

// queueBase makes the base layout jump to the config's admin chain, so that concurrent
// ADDs (each one transaction) all keep their jumps:
//   - an intact base chain only gets the jump, after the last one; the transaction
//     fails if that rule went meanwhile;
//   - a table made fresh is made exclusively: of two first ADDs one fails;
//   - a damaged base chain has the rules that were read deleted by handle (the
//     transaction fails if another ADD rewrote them meanwhile) and is written anew,
//     keeping the admin jumps found.
//
// A failed transaction is retried on a fresh read. The admin chain is created empty and
// never flushed: the operator's rules stay.
func (l *nftLayout) queueBase(c *nftables.Conn, base baseState, admin string) error {
	if base.intact {
		c.AddChain(l.chain(admin))
		r := l.adminJump(admin)
		r.Position = base.lastJump
		c.AddRule(r)
		return nil
	}
	if base.table {
		c.AddTable(l.table)
	} else {
		c.CreateTable(l.table)
	}
	for _, s := range []*nftables.Set{l.ctr4, l.ctr6, l.policed, l.sameBridge, l.isolated} {
		if err := c.AddSet(s, nil); err != nil {
			return fmt.Errorf("firewall: nftables set %s: %w", s.Name, err)
		}
	}
	c.AddChain(l.isolation)
	c.FlushChain(l.isolation)
	for _, r := range l.isolationRules() {
		c.AddRule(r)
	}
	admins := base.admins
	if !slices.Contains(admins, admin) {
		admins = append(slices.Clone(admins), admin)
	}
	for _, a := range admins {
		c.AddChain(l.chain(a))
	}
	c.AddChain(l.forward)
	for _, r := range base.rules {
		if err := c.DelRule(&nftables.Rule{Table: l.table, Chain: l.forward, Handle: r.Handle}); err != nil {
			return fmt.Errorf("firewall: nftables chain %s: %w", nftForwardChain, err)
		}
	}
	c.AddRule(l.isolationJump())
	for _, a := range admins {
		c.AddRule(l.adminJump(a))
	}
	for _, r := range l.accepts() {
		c.AddRule(r)
	}
	return nil
}
