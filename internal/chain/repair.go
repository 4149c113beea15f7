package chain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Repaired is what a repair of one attachment found: the host objects that were
// missing (put back unless it was a dry run), and the plugin types it could not ask
// (exec'd plugins: REPAIR is no spec command, so a plugin of another project cannot be
// told to put its objects back).
type Repaired struct {
	// Missing names each missing object as "<plugin type>: <what its CHECK says>".
	Missing []string
	// Skipped lists the exec'd plugin types of the list.
	Skipped []string
	// Gone is true when the attachment's netns no longer exists: nothing was asked,
	// the attachment is stale (GC's to remove), not broken.
	Gone bool
}

// Repair puts back, for an attachment in the result cache, the host-side objects its
// plugins own that are missing (after `nft flush ruleset`, a firewalld reload): each
// built-in plugin with a Repair callback gets the cached result as prevResult, as
// CHECK does, and touches nothing in the container, runs no IPAM and creates no link.
// It goes on past a plugin that fails, and returns every failure. dryRun only
// reports: what `cni status` says while a reload's damage is not repaired.
func (r *Runner) Repair(ctx context.Context, n *Network, att Attachment, dryRun bool) (Repaired, error) {
	ctx, cancel := r.context(ctx)
	defer cancel()
	if err := att.validate(n.Name); err != nil {
		return Repaired{}, err
	}
	if att.Netns != "" {
		if _, err := os.Stat(att.Netns); errors.Is(err, os.ErrNotExist) {
			return Repaired{Gone: true}, nil
		}
	}
	prev, err := r.CachedResult(n, att)
	if err != nil {
		return Repaired{}, fmt.Errorf("failed to get network %q cached result: %w", n.Name, err)
	}
	if prev == nil {
		return Repaired{}, fmt.Errorf("network %q: no cached result of container %s interface %s", n.Name, att.ContainerID, att.IfName)
	}
	return r.repairPlugins(ctx, n, n.Plugins, prev, &att, dryRun)
}

// repairPlugins asks each built-in plugin of plugins to repair the attachment, prev as
// its prevResult, and lists the exec'd ones as skipped.
func (r *Runner) repairPlugins(ctx context.Context, n *Network, plugins []PluginConf, prev *result.Result,
	att *Attachment, dryRun bool) (Repaired, error) {
	var out Repaired
	var errs []error
	pe := r.procEnv()
	for _, pc := range plugins {
		p := r.builtin(pc.Type)
		if p == nil {
			out.Skipped = append(out.Skipped, pc.Type)
			continue
		}
		conf, err := pluginConfig(n, pc, prev, att, nil)
		var missing []string
		if err == nil {
			// No Pending in ctx: the invocation waits for its plugin's work itself.
			missing, err = skel.InvokeRepair(background.WithPending(ctx, nil), p, pluginArgs(pe, "", att), conf, r.Stderr, dryRun)
		}
		for _, m := range missing {
			// One line: an operator reads one line per attachment.
			out.Missing = append(out.Missing, pc.Type+": "+strings.Join(strings.Fields(m), " "))
		}
		if err != nil {
			errs = append(errs, &PluginError{Type: pc.Type, Network: n.Name, Step: "repair", Err: err})
		}
	}
	return out, errors.Join(errs...)
}

// statusOfAttachments is the part of STATUS that concerns attachments already made:
// code 51 (existing containers may have limited connectivity) naming every host object
// of the network's cached attachments that is missing, until `cni repair` puts them
// back. It asks only about the objects each attachment owns (no table listing), so its
// cost grows with the attachments of the network, not with the host's ruleset.
func (r *Runner) statusOfAttachments(ctx context.Context, n *Network) error {
	cached, err := r.CachedAttachments("")
	if err != nil {
		return nil // no cache, no attachments to speak of
	}
	var broken, failed []string
	for _, c := range cached {
		if c.Network != n.Name {
			continue
		}
		rep, err := r.Repair(ctx, n, c.Attachment, true)
		if err != nil {
			failed = append(failed, fmt.Sprintf("container %s interface %s: %v", c.ContainerID, c.IfName, err))
		}
		if len(rep.Missing) > 0 {
			broken = append(broken, fmt.Sprintf("container %s interface %s: %s", c.ContainerID, c.IfName, strings.Join(rep.Missing, "; ")))
		}
	}
	if len(broken) == 0 && len(failed) == 0 {
		return nil
	}
	msg := fmt.Sprintf("network %q: host objects of %d attachment(s) are missing (a host firewall reload?); `cni repair` puts them back", n.Name, len(broken))
	if len(broken) == 0 {
		msg = fmt.Sprintf("network %q: the host objects of its attachments could not be checked", n.Name)
	}
	return cnierror.New(cnierror.CodeLimitedConnectivity, msg).WithDetails(strings.Join(append(broken, failed...), "\n"))
}
