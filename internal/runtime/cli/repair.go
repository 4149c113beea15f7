package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/host/netfilter"
)

// repairFlags are repair's own flags beside the chain commands' common ones.
type repairFlags struct {
	watch     bool
	quiet     time.Duration
	poll      time.Duration
	systemBus string
}

// runRepair is `cni repair [NETWORK...]`: for every attachment of the result cache
// (of the networks named, or all), the network's config as `cni check` finds it in the
// conf dir, each built-in plugin puts back the host-side objects it owns that are
// missing (masquerade, port mappings, firewall accepts, the bandwidth redirect): what a
// host firewall reload removes. One line per attachment: repaired (with what was
// missing), ok, gone (its netns no longer exists: GC's), skipped (its network is no
// longer in the conf dir) or failed; exit 1 when one failed. --watch then keeps
// repairing after every reload until stopped (repairwatch.go).
func runRepair(p Process, args []string) int {
	fs := newFlagSet(p, "repair", "[NETWORK...] [flags]")
	var c common
	var rf repairFlags
	c.register(fs, p)
	fs.BoolVar(&rf.watch, "watch", false, "after the first pass, repair again whenever the host's firewall is reloaded, until SIGTERM or SIGINT")
	fs.DurationVar(&rf.quiet, "quiet", time.Second, "with --watch: wait for this long without a new reload event before repairing")
	fs.DurationVar(&rf.poll, "poll", 30*time.Second, "with --watch: where legacy iptables tables exist (their changes raise no event), repair this often; 0 never")
	fs.StringVar(&rf.systemBus, "system-bus", p.envOr("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/run/dbus/system_bus_socket"),
		"with --watch: the bus firewalld's Reloaded signal comes on (env DBUS_SYSTEM_BUS_ADDRESS)")
	pos, code, ok := parseArgs(p, fs, args, "[NETWORK...]", 0, math.MaxInt)
	if !ok {
		return code
	}
	if err := repairableHere(); err != nil {
		if rf.watch {
			// The DaemonSet's container: idle, Ready, and saying why in its log.
			fmt.Fprintf(p.Stderr, "cni repair: not watching: %v\n", err)
			return runSleep(p, nil)
		}
		return p.fail("repair", err)
	}
	if rf.watch {
		return watchRepair(p, &c, &rf, pos)
	}
	ctx := c.traced(context.Background(), p, "repair")
	if failed, err := repairPass(ctx, p, &c, pos); err != nil {
		return p.fail("repair", err)
	} else if failed > 0 {
		return ExitFailure
	}
	return ExitOK
}

// repairableHere refuses a repair by a process without the iptables tools (the
// DaemonSet's container) on a node that keeps its rules in iptables: the plugins on the
// host, which have the tools, chose iptables there, and the same plugins here would put
// the rules back in nftables instead.
func repairableHere() error {
	if netfilter.IPTablesInstalled() || !netfilter.HostRulesInIPTables() {
		return nil
	}
	return errors.New("this node keeps its rules in iptables, and this process has no iptables tools in PATH: " +
		"it would put back in nftables what the pods' ADD put in iptables; run cni repair on the host (the packages' cni-repair.service)")
}

// repairPass repairs every cached attachment of the networks named (all when none),
// printing one line each, and returns how many failed. The error is the cache's, when
// it cannot be listed.
func repairPass(ctx context.Context, p Process, c *common, networks []string) (failed int, err error) {
	r := c.runner(p)
	cached, err := r.CachedAttachments("")
	if err != nil {
		return 0, fmt.Errorf("listing cached attachments in %s: %w", c.cacheDir, err)
	}
	loaded := map[string]*chain.Network{}
	loadErr := map[string]error{}
	for _, a := range cached {
		if len(networks) > 0 && !slices.Contains(networks, a.Network) {
			continue
		}
		n, ok := loaded[a.Network]
		if !ok && loadErr[a.Network] == nil {
			n, err = chain.Load(c.confDir, a.Network)
			loaded[a.Network], loadErr[a.Network] = n, err
		}
		who := fmt.Sprintf("%s %s %s", a.Network, a.ContainerID, a.IfName)
		var nf *chain.NotFoundError
		var nc *chain.NoConfigsError
		switch err := loadErr[a.Network]; {
		case errors.As(err, &nf) || errors.As(err, &nc):
			fmt.Fprintf(p.Stdout, "skipped %s: network not in %s\n", who, c.confDir)
			continue
		case err != nil:
			fmt.Fprintf(p.Stdout, "failed %s: %v\n", who, err)
			failed++
			continue
		}
		rep, err := r.Repair(ctx, n, a.Attachment, false)
		printRepair(p, who, rep, err)
		if err != nil {
			failed++
		}
	}
	return failed, nil
}

// printRepair writes the line of one attachment.
func printRepair(p Process, who string, rep chain.Repaired, err error) {
	var note string
	if len(rep.Skipped) > 0 {
		note = " (exec'd plugins not asked: " + strings.Join(rep.Skipped, ", ") + ")"
	}
	switch {
	case err != nil:
		fmt.Fprintf(p.Stdout, "failed %s: %v%s\n", who, err, note)
	case rep.Gone:
		fmt.Fprintf(p.Stdout, "gone %s: netns no longer exists (cni gc removes it)\n", who)
	case len(rep.Missing) > 0:
		fmt.Fprintf(p.Stdout, "repaired %s: %s%s\n", who, strings.Join(rep.Missing, "; "), note)
	default:
		fmt.Fprintf(p.Stdout, "ok %s%s\n", who, note)
	}
}
