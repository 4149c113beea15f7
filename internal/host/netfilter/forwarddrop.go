package netfilter

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables"
)

// ownTablePrefix starts the names of every nftables table the plugins make.
const ownTablePrefix = "cni_"

// ForwardDrop names, in the calling thread's network namespace, a base chain at the
// forward hook outside the plugins' own tables that drops by policy the forwarded
// traffic of the families asked for (v4, v6), "" when there is none. A packet must pass
// every base chain of its hook, so an accept of ours in one table does not save it from
// another's drop: this is what turns a pod's forwarding off under rules of ours that
// CHECK still finds intact (installing Docker sets iptables' FORWARD policy to DROP).
//
// own is the backend holding the pod's accepts. With iptables, they sit behind the
// first rule of FORWARD of table filter, which the policy does not reach, so that
// chain's policy does not count.
//
// It reads as detection does, nothing a node holds in numbers: one dump of the tables'
// headers, then per table of those families a lookup by name of iptables' built-in
// FORWARD chain (filter, mangle, security of ip and ip6, as iptables-nft makes them),
// or, in any other table, of a chain named "forward" (the name nftables' own examples
// and distributions' /etc/nftables.conf give their forward chain). A drop rule inside a
// chain is not read (that is the whole ruleset on a busy node), nor are the legacy
// x_tables (their policy is read only through the whole table's blob). Without
// CAP_NET_ADMIN nf_tables shows nothing, and nothing is found.
func ForwardDrop(v4, v6 bool, own Backend) (string, error) {
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return "", fmt.Errorf("nftables: %w", err)
	}
	defer conn.CloseLasting()
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyUnspecified)
	switch {
	case isErrno(err, syscall.EPERM):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("nftables: list tables: %w", err)
	}
	for _, t := range tables {
		name, ok := forwardChainName(t, v4, v6, own)
		if !ok {
			continue
		}
		c, err := LookupChain(conn, t, name)
		if err != nil {
			return "", err
		}
		if c != nil && c.Hooknum != nil && *c.Hooknum == *nftables.ChainHookForward &&
			c.Policy != nil && *c.Policy == nftables.ChainPolicyDrop {
			return fmt.Sprintf("chain %s of table %s %s (hook forward) drops by policy", name, FamilyName(t.Family), t.Name), nil
		}
	}
	return "", nil
}

// forwardChainName is the chain of table t that ForwardDrop looks up, if any.
func forwardChainName(t *nftables.Table, v4, v6 bool, own Backend) (string, bool) {
	switch {
	case strings.HasPrefix(t.Name, ownTablePrefix):
		return "", false
	case t.Family == nftables.TableFamilyIPv4 && v4, t.Family == nftables.TableFamilyIPv6 && v6:
		if IsBuiltinChain(t.Name, "FORWARD") {
			return "FORWARD", !(own == IPTables && t.Name == "filter")
		}
		return "forward", true
	case t.Family == nftables.TableFamilyINet && (v4 || v6):
		return "forward", true
	}
	return "", false
}

// FamilyName is a table family as nft names it ("ip", "ip6", "inet", "bridge", "arp",
// "netdev"), for messages and listings.
func FamilyName(f nftables.TableFamily) string {
	if int(f) < len(familyNames) && familyNames[f] != "" {
		return familyNames[f]
	}
	return fmt.Sprint(int(f))
}

// familyNames are nft's names of the table families, by number: an array, which the
// linker lays out as data.
var familyNames = [...]string{
	nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6", nftables.TableFamilyINet: "inet",
	nftables.TableFamilyBridge: "bridge", nftables.TableFamilyARP: "arp", nftables.TableFamilyNetdev: "netdev",
}
