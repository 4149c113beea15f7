package firewall

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// Where an attachment is. Its ADD chose the backend (netfilter's rule), and the rules it
// made are the record of that choice: CHECK, DEL and GC, and `cni repair`, look for the
// attachment's own objects rather than asking the rule again, whose answer changes when
// the host's firewall does (Docker installed after the first pods). No file is kept
// beside them: a record that the rules could outlive, or that could outlive the rules,
// would be a second truth about one attachment.

// RecordedBackend tells which rule backend holds the firewall attachment of container
// containerID on network, given its addresses (prevResult's): nftables when an element
// of table inet cni_firewall's address sets is the attachment's (one lookup by key per
// address), else iptables when CNI-FORWARD holds a rule of the attachment, ours or the
// reference's. ok is false when neither does: the attachment's rules are gone, and a
// caller re-applying them applies netfilter's rule, as ADD would. It reads the calling
// thread's network namespace.
func RecordedBackend(ctx context.Context, network, containerID string, ips []netip.Addr) (b netfilter.Backend, ok bool) {
	att := attachment{network: network, containerID: containerID}
	if newNFTLayout().holds(att, ips) {
		return netfilter.NFTables, true
	}
	if netfilter.IPTablesInstalled() && iptHolds(ctx, att, ips) {
		return netfilter.IPTables, true
	}
	return "", false
}

// iptHolds tells whether CNI-FORWARD of a family with addresses holds a rule of the
// attachment, asking for all of them in one iptables-restore of -C lines per family. A
// table that cannot be read holds nothing of it.
func iptHolds(ctx context.Context, att attachment, ips []netip.Addr) bool {
	return slices.ContainsFunc(ipFamilies(ips), func(fam iptables.Family) bool {
		if !iptables.ChainsMayExist(fam, filterTable, privChain) {
			return false
		}
		held := false
		_ = iptables.Inspect(ctx, fam, filterTable, func(t *iptables.Table) error {
			t.Prefetch(addressProbes(att, fam, ips)...) // one exec for them all
			held = holdsAny(func(r iptables.Rule) bool { ok, _ := t.Has(privChain, r); return ok }, att, fam, ips)
			return nil
		})
		return held
	})
}

// checkForwarding fails when the host's own firewall drops, by a forward chain's
// policy, the forwarded traffic the attachment's rules accept: a pod that cannot forward
// must not pass CHECK, however intact our rules are. held is the backend holding them.
func checkForwarding(held netfilter.Backend, ips []netip.Addr) error {
	v4 := slices.ContainsFunc(ips, netip.Addr.Is4)
	v6 := slices.ContainsFunc(ips, func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() })
	drop, err := netfilter.ForwardDrop(v4, v6, held)
	if err != nil {
		return fmt.Errorf("firewall check: the host's forward chains: %w", err)
	}
	if drop != "" {
		return fmt.Errorf("firewall check: the host's firewall drops the container's forwarded traffic that the attachment's %s rules accept: %s "+
			"(an accept in one table does not pass another's drop; with backend iptables the accepts sit in FORWARD itself)", held, drop)
	}
	return nil
}
