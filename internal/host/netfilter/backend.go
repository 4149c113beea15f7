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
// none into an iptables node between an ADD and its CHECK. They are seen with one dump
// of the chains and one of each such base chain's rules (stopping at the first that
// counts) when the caller may dump, and ignored when it may not. The tools are looked
// up in PATH, never run: a node without them (Talos, RHEL 10 without iptables-legacy)
// gets nftables even when a pod's own iptables left tables behind.
package netfilter

import (
	"errors"
	"os"
	"os/exec"
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
func Detect() Backend {
	if !IPTablesInstalled() {
		return NFTables
	}
	// /proc/thread-self, not /proc/net (the main thread's namespace): the plugin may run
	// on a locked thread inside another namespace (in-process runner, tests).
	if legacyTablesInUse("/proc/thread-self/net/ip_tables_names") || legacyTablesInUse("/proc/thread-self/net/ip6_tables_names") {
		return IPTables
	}
	conn, err := nftables.New()
	if err != nil {
		return IPTables // no netlink to nf_tables
	}
	defer conn.CloseLasting()
	chains, err := conn.ListChains()
	switch {
	case isErrno(err, syscall.EPERM):
		// Without CAP_NET_ADMIN nf_tables shows nothing; the unprivileged facts above
		// found no iptables rules, so nothing says the host keeps its rules there.
		return NFTables
	case err != nil:
		return IPTables // no usable nf_tables in this kernel
	case hostRulesInIPTablesNFT(conn, chains):
		return IPTables
	}
	return NFTables
}

// IPTablesInstalled reports whether iptables-restore and iptables-save, which the
// iptables backend runs, are in PATH. It looks, it does not run them.
func IPTablesInstalled() bool {
	for _, tool := range []string{"iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

func legacyTablesInUse(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) != ""
}

// The tables iptables-nft makes and the built-in chains it gives them.
var (
	iptablesTables = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true}
	iptablesChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}
)

// ownChainPrefix starts the names of every iptables chain the plugins make.
const ownChainPrefix = "CNI-"

// hostRulesInIPTablesNFT reports a base chain that iptables-nft made (one of iptables'
// built-in chains, in an ip or ip6 table named like an iptables table; nft users name
// their tables inet and their chains in lower case) which drops by policy or holds a
// rule other than a jump to one of the plugins' CNI-* chains. A chain whose rules cannot
// be read counts.
func hostRulesInIPTablesNFT(conn *nftables.Conn, chains []*nftables.Chain) bool {
	for _, c := range chains {
		fam := c.Table.Family
		if c.Hooknum == nil || (fam != nftables.TableFamilyIPv4 && fam != nftables.TableFamilyIPv6) ||
			!iptablesTables[c.Table.Name] || !iptablesChains[c.Name] {
			continue
		}
		if c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop {
			return true
		}
		rules, err := conn.GetRules(c.Table, c)
		if err != nil {
			return true
		}
		for _, r := range rules {
			if !strings.HasPrefix(jumpTarget(r.Exprs), ownChainPrefix) {
				return true
			}
		}
	}
	return false
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
