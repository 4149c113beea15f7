package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// attempts bounds the optimistic retries of Update.
const attempts = 3

// Load takes a snapshot of one table with one iptables-save (ip6tables-save) exec, a
// firewall step of the invocation log.
func Load(ctx context.Context, fam Family, table string) (_ *Table, err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	return load(ctx, fam, table)
}

func load(ctx context.Context, fam Family, table string) (*Table, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, fam.String()+"-save", "-t", table)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s-save -t %s: %w: %s", fam, table, err, strings.TrimSpace(stderr.String()))
	}
	return Parse(fam, table, stdout.String())
}

// Restore applies an iptables-restore script without flushing anything else, waiting
// for the xtables lock.
func Restore(ctx context.Context, fam Family, script string) error {
	if script == "" {
		return nil
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, fam.String()+"-restore", "--noflush", "-w")
	cmd.Stdin = strings.NewReader(script)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s", fam, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Update plans a change of one table against a fresh snapshot and applies it in one
// restore: at most one save and one restore exec when nothing races, none of the latter
// when plan records nothing. If the restore fails and a fresh snapshot yields a
// different plan (a concurrent writer changed the table in between), it tries again.
// The whole of it is one firewall step of the invocation log.
func Update(ctx context.Context, fam Family, table string, plan func(*Batch) error) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	var last string
	for try := 1; ; try++ {
		t, err := load(ctx, fam, table)
		if err != nil {
			return err
		}
		b := NewBatch(t)
		if err := plan(b); err != nil {
			return err
		}
		if b.Err() != nil {
			return b.Err()
		}
		script := b.Script()
		if script == "" {
			return nil
		}
		err = Restore(ctx, fam, script)
		if err == nil || script == last || try == attempts {
			return err
		}
		last = script
	}
}

// TableInUse reports, without exec'ing anything, whether this network namespace has the
// table in either iptables flavour: the legacy tables are listed in /proc, iptables-nft
// keeps a same-named nftables table of family ip (ip6). A cleanup can skip the
// save/restore execs of a family whose table does not exist.
func TableInUse(fam Family, table string) bool {
	return mayHold(fam, table, func(c *nftables.Conn, t *nftables.Table) error {
		_, err := c.ListTableOfFamily(t.Name, t.Family)
		return err
	})
}

// ChainsMayExist is TableInUse narrowed to chains: with iptables-nft one netlink
// request per chain answers exactly; with legacy tables only a save can tell, so a
// listed legacy table counts as "may".
func ChainsMayExist(fam Family, table string, chains ...string) bool {
	return mayHold(fam, table, func(c *nftables.Conn, t *nftables.Table) error {
		for _, ch := range chains {
			if _, err := c.ListChain(t, ch); err == nil || !netfilter.IsNotExist(err) {
				return err
			}
		}
		return syscall.ENOENT
	})
}

// mayHold answers true when the legacy table is listed, or when lookup (run against the
// iptables-nft table) does not report ENOENT; an unreachable nf_tables counts as "may".
// The legacy list is read through /proc/thread-self: /proc/net shows the main thread's
// namespace, not the one a locked thread may have entered.
func mayHold(fam Family, table string, lookup func(*nftables.Conn, *nftables.Table) error) bool {
	legacy, nftFam := "/proc/thread-self/net/ip_tables_names", nftables.TableFamilyIPv4
	if fam == IPv6 {
		legacy, nftFam = "/proc/thread-self/net/ip6_tables_names", nftables.TableFamilyIPv6
	}
	if b, err := os.ReadFile(legacy); err == nil {
		for _, name := range strings.Fields(string(b)) {
			if name == table {
				return true
			}
		}
	}
	// One socket for all of the lookups (a connection that is not lasting opens one
	// per request).
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return true // cannot tell: let the caller look with iptables-save
	}
	defer conn.CloseLasting()
	err = lookup(conn, &nftables.Table{Name: table, Family: nftFam})
	return err == nil || !netfilter.IsNotExist(err)
}
