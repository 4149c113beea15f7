// Package netfilter chooses between the iptables and nftables rule backends, one
// decision shared by every plugin that installs packet-filter rules (bridge and ptp
// masquerade, portmap, firewall), so they never disagree on a node.
//
// The rule, in order:
//  1. the plugin's config names a backend: that one, where it can run: a config naming
//     iptables on a node without the iptables tools gets nftables (tools write
//     "iptables" into every node's config, Nomad's firewall entry for one), unless it
//     holds options only iptables has, which the plugin then refuses (code 7);
//  2. the host already keeps its own rules in iptables, and the iptables tools are
//     installed to reach them: iptables;
//  3. otherwise nftables.
//
// "Keeps its rules in iptables" is read without exec'ing anything and without needing
// CAP_NET_ADMIN: the legacy x_tables in use are listed in /proc (readable by root without
// any capability). Tables made by iptables-nft (ip/ip6 tables named like the iptables
// tables, with base chains named like iptables' built-in chains) count when one of those
// base chains drops by policy or holds a rule that is not a jump to a CNI-* chain: the
// plugins' own iptables rules (all behind CNI-* chains) must not turn a node that had
// none into an iptables node between an ADD and its CHECK. They are read without
// reading what else the node holds: one dump of the tables' headers, a lookup by name of
// each built-in chain of the iptables tables present, and the rules of one such chain
// at a time until one counts, so that detection costs the same beside kube-proxy's
// thousands of chains (its own table in nftables mode, its chains in iptables-nft's) as
// on an empty node; a caller without CAP_NET_ADMIN is refused the table dump, and then
// nothing of nf_tables counts. The tools are looked up in PATH, never run: a node
// without them (Talos, RHEL 10 without iptables-legacy) gets nftables even when a pod's
// own iptables left tables behind.
//
// ForwardDrop reads the host's forward chains the same way, for the firewall's CHECK: a
// chain of the host's dropping forwarded traffic by policy cuts a pod off whatever our
// rules accept.
package netfilter

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// Backend is a rule engine.
type Backend string

// The backends.
const (
	IPTables Backend = "iptables"
	NFTables Backend = "nftables"
)

// Choose resolves a config value ("", "auto", "iptables", "nftables"); field names the
// config key for the error message.
func Choose(field, setting string) (Backend, error) {
	switch setting {
	case "", "auto":
		return Detect(), nil
	case string(IPTables):
		return Runnable(IPTables), nil
	case string(NFTables):
		return NFTables, nil
	}
	return "", cnierror.Newf(cnierror.CodeInvalidConfig,
		"%s: invalid value %q (want \"iptables\", \"nftables\" or \"auto\")", field, setting)
}

// Runnable is the backend a config's b comes to on this node (step 1 of the rule):
// iptables where its tools are installed, nftables otherwise.
func Runnable(b Backend) Backend {
	if b == IPTables && !IPTablesInstalled() {
		return NFTables
	}
	return b
}

// Detect applies steps 2 and 3 of the rule in the calling thread's network namespace.
func Detect() Backend { return detect() }

// detect is Detect with options for its nf_tables connection (tests record through one).
func detect(opts ...nftables.ConnOption) Backend {
	if IPTablesInstalled() && hostRulesInIPTables(opts...) {
		return IPTables
	}
	return NFTables
}

// HostRulesInIPTables is step 2 of the rule without its tools: whether the host keeps
// its own rules in iptables. A process without the iptables tools (the DaemonSet's
// container) learns from it that the plugins on the host chose iptables where it
// would choose nftables.
func HostRulesInIPTables() bool { return hostRulesInIPTables() }

func hostRulesInIPTables(opts ...nftables.ConnOption) bool {
	// /proc/thread-self, not /proc/net (the main thread's namespace): the plugin may run
	// on a locked thread inside another namespace (in-process runner, tests).
	if LegacyTablesInUse() {
		return true
	}
	conn, err := nftables.New(append([]nftables.ConnOption{nftables.AsLasting()}, opts...)...)
	if err != nil {
		return true // no netlink to nf_tables
	}
	defer conn.CloseLasting()
	// The tables' headers only: a node's chains, sets and rules are not in this answer.
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyUnspecified)
	switch {
	case isErrno(err, syscall.EPERM):
		// Without CAP_NET_ADMIN nf_tables shows nothing; the unprivileged facts above
		// found no iptables rules, so nothing says the host keeps its rules there.
		return false
	case err != nil:
		return true // no usable nf_tables in this kernel
	}
	return hostRulesInIPTablesNFT(conn, tables)
}

// IPTablesInstalled reports whether iptables (which lists and checks our chains) and
// iptables-restore (which changes them), the tools the iptables backend runs, are in
// PATH. It looks, it does not run them.
func IPTablesInstalled() bool {
	for _, tool := range []string{"iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// LegacyTablesInUse reports whether the calling thread's network namespace has legacy
// (x_tables) iptables tables, whose changes raise no netlink event.
func LegacyTablesInUse() bool {
	return legacyTablesInUse("/proc/thread-self/net/ip_tables_names") || legacyTablesInUse("/proc/thread-self/net/ip6_tables_names")
}

func legacyTablesInUse(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) != ""
}

// The tables iptables makes, with the built-in chains it gives each (iptables-nft makes
// them when first used); the order in which detection reads the chains, the ones most
// likely to hold a rule of the host's first: FORWARD is where a host's firewall and
// kube-proxy's forwarding rules are, and POSTROUTING, which holds the masquerade's own
// jumps (CNI-*), comes last. Slices of pairs rather than a map: the linker lays them out
// as data, where a map literal is code that every exec of the binary would run before
// main, whichever plugin it is.
var (
	iptablesChains = []struct {
		table  string
		chains []string
	}{
		{"filter", []string{"INPUT", "FORWARD", "OUTPUT"}},
		{"nat", []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}},
		{"mangle", []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}},
		{"raw", []string{"PREROUTING", "OUTPUT"}},
		{"security", []string{"INPUT", "FORWARD", "OUTPUT"}},
	}
	builtinOrder = []string{"FORWARD", "PREROUTING", "OUTPUT", "INPUT", "POSTROUTING"}
)

// IsBuiltinChain reports whether chain is one of the built-in chains iptables gives the
// table: iptables-nft makes them when first used, so one that the kernel does not hold
// yet is an empty chain, not a missing one.
func IsBuiltinChain(table, chain string) bool {
	for _, t := range iptablesChains {
		if t.table == table {
			return slices.Contains(t.chains, chain)
		}
	}
	return false
}

// ownChainPrefix starts the names of every iptables chain the plugins make.
const ownChainPrefix = "CNI-"

// hostRulesInIPTablesNFT reports a base chain that iptables-nft made (one of iptables'
// built-in chains of its table, in an ip or ip6 table named like an iptables table; nft
// users name their tables inet and their chains in lower case) which drops by policy or
// holds a rule other than a jump to one of the plugins' CNI-* chains. Each chain is
// looked up by name and read alone, so what else the tables hold (kube-proxy's
// KUBE-SERVICES and its thousands of chains) is never read. A chain that cannot be read
// counts.
func hostRulesInIPTablesNFT(conn *nftables.Conn, tables []*nftables.Table) bool {
	for _, name := range builtinOrder {
		for _, t := range tables {
			if (t.Family != nftables.TableFamilyIPv4 && t.Family != nftables.TableFamilyIPv6) ||
				!IsBuiltinChain(t.Name, name) {
				continue
			}
			if hostRulesIn(conn, t, name) {
				return true
			}
		}
	}
	return false
}

// hostRulesIn reports whether the built-in chain name of t, when there is one, counts
// as the host's.
func hostRulesIn(conn *nftables.Conn, t *nftables.Table, name string) bool {
	c, err := LookupChain(conn, t, name)
	switch {
	case err != nil:
		return true
	case c == nil || c.Hooknum == nil:
		return false // not there, or a regular chain, which iptables cannot have made
	case c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop:
		return true
	}
	rules, err := conn.GetRules(t, c)
	return err != nil || slices.ContainsFunc(rules, func(r *nftables.Rule) bool {
		return !strings.HasPrefix(jumpTarget(r.Exprs), ownChainPrefix)
	})
}

// jumpTarget is the chain a rule jumps or goes to, "" for none.
func jumpTarget(exprs []expr.Any) string {
	for _, e := range exprs {
		if v, ok := e.(*expr.Verdict); ok && (v.Kind == expr.VerdictJump || v.Kind == expr.VerdictGoto) {
			return v.Chain
		}
	}
	return ""
}

// IsNotExist reports a "no such table, chain, set or element" answer of nf_tables.
func IsNotExist(err error) bool { return isErrno(err, syscall.ENOENT) }

// isErrno reports an nf_tables answer of errno. google/nftables does not always wrap
// the errno, so its text is matched too.
func isErrno(err error, errno syscall.Errno) bool {
	return err != nil && (errors.Is(err, errno) || strings.Contains(err.Error(), errno.Error()))
}
