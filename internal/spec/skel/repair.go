package skel

import (
	"cmp"
	"context"
	"io"
)

// Repair is what one REPAIR (InvokeRepair) found missing on the host and whether it
// puts it back: a dry run (cni status) only reports.
type Repair struct {
	// DryRun reports the missing objects without putting them back.
	DryRun bool
	// Missing names, in the order found, each host object that was missing, as the
	// plugin's CHECK words it ("masquerade: nftables chain m-… missing").
	Missing []string
}

// Found records that the host object named what is missing and reports whether the
// caller is to put it back. A nil Repair (a request that is no REPAIR) records nothing
// and says no.
func (r *Repair) Found(what string) bool {
	if r == nil {
		return false
	}
	r.Missing = append(r.Missing, what)
	return !r.DryRun
}

// Repair is the record of a REPAIR request; nil for every other command.
func (r *Request) Repair() *Repair { return r.repair }

type repairKey struct{}

// InvokeRepair runs p's Repair callback in-process with the same checks as Invoke (the
// environment of a CHECK, the config with its prevResult) and returns what it found
// missing, and put back unless dryRun. A plugin without Repair finds nothing.
func InvokeRepair(ctx context.Context, p *Plugin, args Args, config []byte, stderr io.Writer, dryRun bool) ([]string, error) {
	if p.Repair == nil {
		return nil, nil
	}
	rep := &Repair{DryRun: dryRun}
	args.Command = CmdRepair
	_, err := Invoke(context.WithValue(cmp.Or(ctx, context.Background()), repairKey{}, rep), p, args, config, stderr)
	return rep.Missing, err
}
