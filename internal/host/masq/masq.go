// Package masq masquerades the traffic of bridge and ptp attachments: packets from a
// container address leaving for anywhere but the attachment's own subnet or a multicast
// group get the host's address. Two backends exist; netfilter.Choose picks one per
// node.
//
// iptables keeps the reference plugins' layout, so operators' tooling keeps working: a
// nat chain CNI-<sha512(network+containerID) hex, cut to 28 chars> holding `-d <subnet>
// -j ACCEPT` per address and `! -d 224.0.0.0/4 -j MASQUERADE` (ff00::/8 for IPv6),
// jumped to from `POSTROUTING -s <ip> -j CNI-<hash>`, every rule with the comment
// `name: "<network>" id: "<containerID>"`. As there, the chain is keyed by network and
// container only: two interfaces of one container on one network share it, and the
// Teardown of either removes it. Unlike the reference (one `iptables` exec per
// rule), a Setup or Teardown is one iptables-restore per family, and nothing reads the
// nat table whole (on a kube-proxy node it holds tens of thousands of rules): a Setup
// of a new chain reads nothing (with iptables-nft, netlink says the chain is new, and
// nothing can jump to a new chain yet), a repeated one lists the chain and asks
// POSTROUTING about each jump (`iptables -C`); CHECK does the same; a Teardown lists
// POSTROUTING, whose jumps it cannot rebuild without the addresses; GC finds stale
// chains from the commented jumps in that one listing.
//
// nftables talks netlink directly (no `nft` exec) to its own table `inet cni_masquerade`
// (not the reference's `cni_plugins_masquerade`, whose layout differs). Its base chain
// skips multicast, then looks the source address up in the verdict maps @masq4/@masq6,
// whose element for each container address jumps (goto) to the attachment's own chain
// `m-<hash(network)>-<hash(network,containerID,ifName)>`: `daddr <subnet> return` per
// address, then `masquerade` with a comment naming the attachment and its addresses.
// Per-packet cost is one map lookup whatever the number of attachments, and a Setup,
// Teardown or Check touches only its own chain and map elements, in one netlink
// transaction, found by name.
//
// Teardown needs only network, container ID and interface: it finds the state by chain
// name and comment, never by the container's addresses, so a DEL whose netns is gone
// still removes it (the reference leaks it, #810). It always cleans both backends, so a
// node that switched backend (or came from the reference plugins) is left clean: that
// includes the reference's own nftables rules (table inet cni_plugins_masquerade, chain
// masq_checks, recognised by the hash their comment starts with), at the cost of one
// table lookup on nodes that never had them. GC does the same for a whole network.
// CHECK of an attachment the reference set up passes on the reference's state: when the
// chosen backend holds nothing of the attachment, it checks the iptables layout (the
// reference's default) and the reference's nftables table instead (adopt.go), and our
// own nftables layout when the rule chose iptables, as it does for the pods of an
// nftables node once the host keeps rules of its own in iptables.
// IPv4 and IPv6 are enabled separately (#398).
package masq

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"net/netip"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/owner"
)

// Attachment is one container interface on one network.
type Attachment struct {
	Network, ContainerID, IfName string
	// IPs are the container's addresses with their subnet's prefix length (10.1.0.5/24).
	IPs []netip.Prefix
}

// Options choose the backend and the families to masquerade.
type Options struct {
	// Backend is the rule engine; "" detects one (netfilter.Detect).
	Backend netfilter.Backend
	IPv4    bool
	IPv6    bool
}

// ips returns the attachment's addresses of the enabled families.
func (o Options) ips(att Attachment) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range att.IPs {
		if p.Addr().Unmap().Is4() && o.IPv4 || p.Addr().Is6() && !p.Addr().Is4In6() && o.IPv6 {
			out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()))
		}
	}
	return out
}

func (o Options) backend() netfilter.Backend {
	if o.Backend == "" {
		return netfilter.Detect()
	}
	return o.Backend
}

// Setup masquerades the attachment's addresses of the enabled families. Running it again
// for the same attachment replaces its rules.
func Setup(ctx context.Context, att Attachment, opts Options) error {
	ips := opts.ips(att)
	if len(ips) == 0 {
		return nil
	}
	switch b := opts.backend(); b {
	case netfilter.IPTables:
		return iptSetup(ctx, att, ips)
	case netfilter.NFTables:
		return steps.Begin(ctx, steps.Firewall).Done(nftSetup(att, ips))
	default:
		return fmt.Errorf("masquerade: unknown backend %q", b)
	}
}

// Teardown removes every masquerade rule of the attachment from both backends. It needs
// no addresses and succeeds when there is nothing to remove.
func Teardown(ctx context.Context, network, containerID, ifName string) error {
	return errors.Join(
		iptTeardown(ctx, network, containerID),
		steps.Begin(ctx, steps.Firewall).Done(nftTeardown(network, containerID, ifName)),
	)
}

// Check verifies that the attachment's addresses of the enabled families are
// masqueraded as Setup left them, or, when the chosen backend holds nothing of the
// attachment, as the reference plugins did (checkAdopted).
func Check(ctx context.Context, att Attachment, opts Options) error {
	ips := opts.ips(att)
	if len(ips) == 0 {
		return nil
	}
	var err error
	b := opts.backend()
	switch b {
	case netfilter.IPTables:
		err = iptCheck(ctx, att, ips)
	case netfilter.NFTables:
		err = steps.Begin(ctx, steps.Firewall).Done(nftCheck(att, ips))
	default:
		return fmt.Errorf("masquerade: unknown backend %q", b)
	}
	if errors.Is(err, errAbsent) {
		return checkAdopted(ctx, b, att, ips, err)
	}
	return err
}

// GC removes, in both backends, the masquerade of every attachment of network that is
// not in valid.
// valid yields the container id and interface name of each attachment to keep.
func GC(ctx context.Context, network string, valid iter.Seq2[string, string]) error {
	return errors.Join(iptGC(ctx, network, valid), steps.Begin(ctx, steps.Firewall).Done(nftGC(network, valid)))
}

// iptChainName is the reference plugins' chain name for an attachment.
func iptChainName(network, containerID string) string {
	sum := sha512.Sum512([]byte(network + containerID))
	return "CNI-" + hex.EncodeToString(sum[:])[:24]
}

// iptComment is the reference plugins' rule comment for an attachment, hashed where a
// long container id would not fit.
func iptComment(network, containerID string) string {
	return owner.Comment("", network, containerID, iptables.MaxComment)
}

// nftChainPrefix starts the chain names of all attachments of a network, so GC finds
// them by name.
func nftChainPrefix(network string) string {
	sum := sha256.Sum256([]byte(network))
	return "m-" + hex.EncodeToString(sum[:6]) + "-"
}

// nftChainName is the nftables chain of one attachment.
func nftChainName(network, containerID, ifName string) string {
	sum := sha256.Sum256([]byte(network + "\x00" + containerID + "\x00" + ifName))
	return nftChainPrefix(network) + hex.EncodeToString(sum[:10])
}
