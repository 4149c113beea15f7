package netfilter

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nlconn"
)

// The plugins read nf_tables by name, never by family. google/nftables lists chains
// only as a dump of every chain of a family (ListChainsOfTableFamily; the kernel
// cannot narrow a chain dump to one table), which on a Kubernetes node holds
// kube-proxy's thousands of chains: table ip kube-proxy in its nftables mode, the
// KUBE-* chains of iptables-nft's tables in its iptables mode. The helpers below read
// one chain, or the chains of one table of ours.

// LookupChain reads the chain name of table t: one lookup, whatever the node holds. A
// missing table or chain is nil, nil.
func LookupChain(c *nftables.Conn, t *nftables.Table, name string) (*nftables.Chain, error) {
	ch, err := c.ListChain(t, name)
	switch {
	case err == nil:
		return ch, nil
	case IsNotExist(err):
		return nil, nil
	}
	return nil, fmt.Errorf("nftables: chain %s %s: %w", t.Name, name, err)
}

// ChainsWithRules returns the names of the chains of one table that hold rules, each
// once, in the order the kernel keeps them, in the calling thread's network namespace.
// It is one dump of the table's rules, which the kernel narrows to the table: nothing
// of the others is read or sent. A chain without rules is not in it; a missing table
// answers none.
func ChainsWithRules(family nftables.TableFamily, table string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	err := dumpRules(family, table, func(chain string) {
		if !seen[chain] {
			seen[chain] = true
			names = append(names, chain)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: rules of %s: %w", table, err)
	}
	return names, nil
}

// dumpInterruptedTries bounds the dumps that a concurrent transaction interrupts (the
// kernel marks an answer that spans a commit) before dumpRules gives up.
const dumpInterruptedTries = 3

// dumpRules calls each with the chain of every rule of the table. A kernel that ignored
// the table's name in a rule dump (old ones did) would send every table's rules: those
// of other tables are left out here, so the answer is right either way.
func dumpRules(family nftables.TableFamily, table string, each func(chain string)) error {
	for try := 1; ; try++ {
		req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETRULE, unix.NLM_F_DUMP)
		req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(family), Version: unix.NFNETLINK_V0})
		req.AddData(nl.NewRtAttr(unix.NFTA_RULE_TABLE, cString(table)))
		msgs, err := nlconn.Execute(netns.None(), req, unix.NETLINK_NETFILTER, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE)
		switch {
		case errors.Is(err, nl.ErrDumpInterrupted) && try < dumpInterruptedTries:
			continue
		case errors.Is(err, syscall.ENOENT):
			return nil
		case err != nil:
			return err
		}
		for _, m := range msgs {
			if len(m) < 4 {
				continue
			}
			attrs := m[4:] // after the nfgenmsg header
			t, _ := findAttr(attrs, unix.NFTA_RULE_TABLE)
			chain, ok := findAttr(attrs, unix.NFTA_RULE_CHAIN)
			if ok && strings.TrimRight(string(t), "\x00") == table {
				each(strings.TrimRight(string(chain), "\x00"))
			}
		}
		return nil
	}
}
