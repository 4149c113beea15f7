package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/spec/skel"
)

// The MAC spoof check lives in one bridge-family table of the host: a base chain at the
// bridge prerouting hook jumps, per attachment, from frames entering through the host
// veth to a chain that returns for the container's own source MAC and drops the rest.
// Everything is found again from (network, container id, ifname) alone: the chain name
// is a hash of them and the jump rule's comment spells them out, so DEL and GC need no
// prevResult and no netns.
const (
	spoofTable       = "cni_macspoofchk"
	spoofBaseChain   = "prerouting"
	spoofCommentHead = "macspoofchk"
)

// spoofKey identifies one attachment's spoof-check state.
type spoofKey struct{ network, containerID, ifName string }

func (k spoofKey) chain() string {
	sum := sha256.Sum256([]byte(k.network + "\x00" + k.containerID + "\x00" + k.ifName))
	return "cni-sc-" + hex.EncodeToString(sum[:12])
}

// spoofCommentMax is the longest comment nft shows in full (and well within a rule's
// userdata).
const spoofCommentMax = 128

// comment names the attachment; a container id (then also a network name) too long for
// it is written in its hashed form (see package owner).
func (k spoofKey) comment() string {
	c := k
	for _, hash := range []*string{&c.containerID, &c.network} {
		if s := c.format(); len(s) <= spoofCommentMax {
			return s
		}
		*hash = owner.Hashed(*hash)
	}
	return c.format()
}

func (k spoofKey) format() string {
	return fmt.Sprintf("%s net=%s id=%s if=%s", spoofCommentHead, k.network, k.containerID, k.ifName)
}

// names reports whether k, read back from a comment (its fields possibly hashed), names
// the attachment a.
func (k spoofKey) names(a spoofKey) bool {
	return k.ifName == a.ifName && owner.Names(k.containerID, a.containerID) && owner.Names(k.network, a.network)
}

// parseSpoofComment reads back a jump rule's comment; ok is false for foreign rules.
func parseSpoofComment(c string) (k spoofKey, ok bool) {
	f := strings.Fields(c)
	if len(f) != 4 || f[0] != spoofCommentHead {
		return k, false
	}
	var found int
	for _, kv := range f[1:] {
		key, v, _ := strings.Cut(kv, "=")
		switch key {
		case "net":
			k.network, found = v, found+1
		case "id":
			k.containerID, found = v, found+1
		case "if":
			k.ifName, found = v, found+1
		}
	}
	return k, found == 3
}

func spoofTableRef() *nftables.Table {
	return &nftables.Table{Name: spoofTable, Family: nftables.TableFamilyBridge}
}

// setupSpoofCheck installs the rules that let frames from hostVeth through only with
// source MAC mac. Earlier state of the same attachment is replaced.
func setupSpoofCheck(k spoofKey, hostVeth string, mac net.HardwareAddr) error {
	if err := teardownSpoofCheck(k); err != nil {
		return err
	}
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("macspoofchk: nftables: %w", err)
	}
	table := conn.AddTable(spoofTableRef())
	prio := nftables.ChainPriority(-300)
	policy := nftables.ChainPolicyAccept
	base := conn.AddChain(&nftables.Chain{
		Name: spoofBaseChain, Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: &prio, Policy: &policy,
	})
	per := conn.AddChain(&nftables.Chain{Name: k.chain(), Table: table})
	// `ether saddr 02:42:ac:11:00:02 return`: frames with the container's own source
	// MAC go on; the next rule, `drop`, takes the rest.
	conn.AddRule(&nftables.Rule{Table: table, Chain: per, Exprs: nftexpr.Rule(nftexpr.EtherSaddrIs(mac), nftexpr.Return())})
	conn.AddRule(&nftables.Rule{Table: table, Chain: per, Exprs: nftexpr.Drop()})
	// `iifname "veth1234" jump cni-sc-<hash>`: frames the container sends.
	conn.AddRule(&nftables.Rule{
		Table: table, Chain: base, Exprs: nftexpr.Rule(nftexpr.IIFNameIs(hostVeth), nftexpr.Jump(per.Name)),
		UserData: userdata.AppendString(nil, userdata.TypeComment, k.comment()),
	})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("macspoofchk: install rules for %s: %w", hostVeth, err)
	}
	return nil
}

// teardownSpoofCheck removes the attachment's rules and chain; missing ones are fine.
func teardownSpoofCheck(k spoofKey) error {
	return removeSpoofChecks(func(have spoofKey) bool { return have.names(k) }, k.chain())
}

// gcSpoofChecks removes the spoof checks of network's attachments not in valid.
func gcSpoofChecks(network string, valid []skel.Attachment) error {
	return removeSpoofChecks(func(have spoofKey) bool {
		if !owner.Names(have.network, network) {
			return false
		}
		return !slices.ContainsFunc(valid, func(a skel.Attachment) bool {
			return have.names(spoofKey{network, a.ContainerID, a.IfName})
		})
	}, "")
}

// removeSpoofChecks deletes every attachment whose jump rule matches doomed, plus the
// chain named extra when it exists without a jump rule (a half-removed attachment). It
// reads the base chain's rules and looks extra up by name: never the bridge family's
// chains, whose dump would hold every table of the family, ours or not.
func removeSpoofChecks(doomed func(spoofKey) bool, extra string, opts ...nftables.ConnOption) error {
	conn, err := nftables.New(append([]nftables.ConnOption{nftables.AsLasting()}, opts...)...)
	if err != nil {
		return fmt.Errorf("macspoofchk: nftables: %w", err)
	}
	defer conn.CloseLasting()
	table := spoofTableRef()
	// A rule dump of a chain that is not there answers nothing, as one of an empty chain.
	rules, err := conn.GetRules(table, &nftables.Chain{Name: spoofBaseChain, Table: table})
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("macspoofchk: list rules: %w", err)
	}
	// A chain a jump names exists (nf_tables refuses a jump to a missing chain and the
	// deletion of a chain still jumped to), so only extra is looked up.
	gone := map[string]bool{}
	for _, r := range rules {
		c, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		k, ok := parseSpoofComment(c)
		if !ok || !doomed(k) {
			continue
		}
		if err := conn.DelRule(r); err != nil {
			return fmt.Errorf("macspoofchk: %w", err)
		}
		// The chain is read from the jump: the comment may name the attachment by
		// hashes, from which its chain cannot be derived.
		if chain := nftexpr.VerdictChain(r.Exprs); chain != "" {
			gone[chain] = true
		}
	}
	if extra != "" && !gone[extra] {
		c, err := netfilter.LookupChain(conn, table, extra)
		if err != nil {
			return fmt.Errorf("macspoofchk: %w", err)
		}
		gone[extra] = c != nil
	}
	for name, present := range gone {
		if present {
			c := &nftables.Chain{Name: name, Table: table}
			conn.FlushChain(c)
			conn.DelChain(c)
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("macspoofchk: remove rules: %w", err)
	}
	return nil
}

// checkSpoofCheck verifies that the attachment's chain and jump rule exist.
func checkSpoofCheck(k spoofKey) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("macspoofchk: nftables: %w", err)
	}
	table := spoofTableRef()
	base := &nftables.Chain{Name: spoofBaseChain, Table: table}
	rules, err := conn.GetRules(table, base)
	if err != nil {
		return fmt.Errorf("macspoofchk: rules for %s/%s missing: %w", k.containerID, k.ifName, err)
	}
	for _, r := range rules {
		c, _ := userdata.GetString(r.UserData, userdata.TypeComment)
		if have, ok := parseSpoofComment(c); ok && have.names(k) {
			return nil
		}
	}
	return fmt.Errorf("macspoofchk: rule for %s/%s missing", k.containerID, k.ifName)
}
