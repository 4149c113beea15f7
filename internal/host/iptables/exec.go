package iptables

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// attempts bounds the optimistic retries of Update.
const attempts = 3

// Inspect runs look against a view of one table that reads only what look asks for
// (Table), as one firewall step of the invocation log.
func Inspect(ctx context.Context, fam Family, table string, look func(*Table) error) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	src := newExecSource(ctx, fam, table)
	defer src.close()
	return look(newTable(fam, table, src))
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

// Update plans a change of one table against a fresh view of it (reading only the
// chains the plan touches) and applies it in one restore, none when plan records
// nothing. If the restore fails and fresh reads yield a different plan (a concurrent
// writer changed the table in between), it tries again. The whole of it is one
// firewall step of the invocation log.
func Update(ctx context.Context, fam Family, table string, plan func(*Batch) error) (err error) {
	defer steps.Begin(ctx, steps.Firewall).End(&err)
	var last string
	for try := 1; ; try++ {
		script, err := planned(ctx, fam, table, plan)
		if err != nil || script == "" {
			return err
		}
		err = Restore(ctx, fam, script)
		if err == nil || script == last || try == attempts {
			return err
		}
		last = script
	}
}

// planned runs plan against a fresh view and returns its script.
func planned(ctx context.Context, fam Family, table string, plan func(*Batch) error) (string, error) {
	src := newExecSource(ctx, fam, table)
	defer src.close()
	b := NewBatch(newTable(fam, table, src))
	if err := cmp.Or(plan(b), b.Err()); err != nil {
		return "", err
	}
	return b.Script(), nil
}

// execSource reads a table with the iptables tools, one chain at a time, after asking
// nf_tables whether the chain is there at all.
type execSource struct {
	ctx   context.Context
	fam   Family
	table string
	// conn is one netlink socket for every existence check of the view, opened on
	// first use (nil before, and when nf_tables cannot be reached).
	conn   *nftables.Conn
	opened bool
}

func newExecSource(ctx context.Context, fam Family, table string) *execSource {
	return &execSource{ctx: ctx, fam: fam, table: table}
}

func (s *execSource) close() {
	if s.conn != nil {
		_ = s.conn.CloseLasting()
	}
}

// exists asks nf_tables, which holds iptables-nft's chains by their names. Legacy
// tables in use leave it unknown: only the tools can read them.
func (s *execSource) exists(chain string) (exists, known bool) {
	if legacyTableInUse(s.fam, s.table) {
		return false, false
	}
	if !s.opened {
		s.opened = true
		if c, err := nftables.New(nftables.AsLasting()); err == nil {
			s.conn = c
		}
	}
	if s.conn == nil {
		return false, false
	}
	ch, err := netfilter.LookupChain(s.conn, &nftables.Table{Name: s.table, Family: nftFamily(s.fam)}, chain)
	return ch != nil, err == nil
}

// list runs `iptables -w -t TABLE -S CHAIN`. A chain that does not exist is exit status
// 1, with a message that differs between versions and flavours (1.8.9's iptables-nft
// calls it "incompatible"): it is taken as missing when the message says so or the
// kernel, asked again, no longer holds the chain.
func (s *execSource) list(chain string) (*Chain, error) {
	out, stderr, err := s.run("-S", chain)
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			if strings.Contains(stderr, "No chain/target/match by that name") || strings.Contains(stderr, "does not exist") {
				return nil, nil
			}
			if e, known := s.exists(chain); known && !e {
				return nil, nil
			}
		}
		return nil, fmt.Errorf("%s -t %s -S %s: %w: %s", s.fam, s.table, chain, err, stderr)
	}
	// The listing is all there is to know of the chain.
	t, err := ParseRules(s.fam, s.table, out)
	if err != nil {
		return nil, err
	}
	return t.listed[chain], nil
}

// check runs `iptables -w -t TABLE -C CHAIN RULE...`: exit status 0 when the chain
// holds the rule, 1 when it does not.
func (s *execSource) check(chain string, r Rule) (bool, error) {
	_, stderr, err := s.run(append([]string{"-C", chain}, r...)...)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, fmt.Errorf("%s -t %s -C %s %s: %w: %s", s.fam, s.table, chain, r, err, stderr)
}

// checkFirst asks with one `iptables-restore --noflush` whose script is a -C line per
// probe: both flavours accept -C there. A rule that is missing fails the restore at its
// line ("line N failed"), a rule iptables refuses to look for (a jump to a chain that
// does not exist) too ("Error occurred at line: N"), the probes before it being held.
func (s *execSource) checkFirst(probes []Probe) (int, error) {
	var script strings.Builder
	script.WriteString("*" + s.table + "\n")
	for _, p := range probes {
		if err := checkLine(p.Chain, p.Rule); err != nil {
			return -1, err
		}
		fmt.Fprintf(&script, "-C %s %s\n", p.Chain, p.Rule)
	}
	script.WriteString("COMMIT\n")
	err := Restore(s.ctx, s.fam, script.String())
	if err == nil {
		return len(probes), nil
	}
	// Line 1 is "*table": line n is probe n-2. iptables-nft may name the COMMIT line
	// for a refusal, which places it on no probe.
	if m := failedLine().FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(cmp.Or(m[1], m[2]))
		if i := n - 2; i >= 0 && i < len(probes) {
			if m[1] != "" {
				return i, nil
			}
			return i, fmt.Errorf("%s -C %s %s: %w", s.fam, probes[i].Chain, probes[i].Rule, err)
		}
	}
	return -1, fmt.Errorf("%s -C of %d rules: %w", s.fam, len(probes), err)
}

// failedLine finds the line an iptables-restore failed at, in either flavour's words:
// a command that failed ("iptables-restore: line 3 failed", "iptables-nft-restore: line
// 3 failed: Bad rule ...") or that it refused ("Error occurred at line: 3"). Compiled
// on first use: only a refused -C batch needs it, and a package-level MustCompile runs
// in every exec of the binary, whichever plugin it is.
var failedLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`line (\d+) failed|Error occurred at line: (\d+)`)
})

func (s *execSource) run(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	cmd := exec.CommandContext(s.ctx, s.fam.String(), append([]string{"-w", "-t", s.table}, args...)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), strings.TrimSpace(e.String()), err
}

// TableInUse reports, without exec'ing anything, whether this network namespace has the
// table in either iptables flavour: the legacy tables are listed in /proc, iptables-nft
// keeps a same-named nftables table of family ip (ip6). A cleanup can skip the
// execs of a family whose table does not exist.
func TableInUse(fam Family, table string) bool {
	return mayHold(fam, table, func(c *nftables.Conn, t *nftables.Table) error {
		_, err := c.ListTableOfFamily(t.Name, t.Family)
		return err
	})
}

// ChainsMayExist is TableInUse narrowed to chains: with iptables-nft one netlink
// request per chain answers exactly; with legacy tables only the tools can tell, so a
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
func mayHold(fam Family, table string, lookup func(*nftables.Conn, *nftables.Table) error) bool {
	if legacyTableInUse(fam, table) {
		return true
	}
	// One socket for all of the lookups (a connection that is not lasting opens one
	// per request).
	conn, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return true // cannot tell: let the caller look with the tools
	}
	defer conn.CloseLasting()
	err = lookup(conn, &nftables.Table{Name: table, Family: nftFamily(fam)})
	return err == nil || !netfilter.IsNotExist(err)
}

// legacyTableInUse tells whether the legacy x_tables hold table. The list is read
// through /proc/thread-self: /proc/net shows the main thread's namespace, not the one a
// locked thread may have entered.
func legacyTableInUse(fam Family, table string) bool {
	legacy := "/proc/thread-self/net/ip_tables_names"
	if fam == IPv6 {
		legacy = "/proc/thread-self/net/ip6_tables_names"
	}
	b, err := os.ReadFile(legacy)
	return err == nil && slices.Contains(strings.Fields(string(b)), table)
}

func nftFamily(fam Family) nftables.TableFamily {
	if fam == IPv6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}
