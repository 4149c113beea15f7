package skel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/result"
)

// logged is one invocation as the invocation log sees it; nil while the log is off, and
// every method of a nil *logged does nothing, so that an invocation without a log reads
// no clock and allocates nothing for it.
type logged struct {
	cfg    *invlog.Config
	rec    *steps.Recorder
	parent tracectx.SpanID
	net    NetConf
	// creator's and own are set when the invocation's background work joins its
	// creator's Pending (a chain child's DEL, a delegate): the line is written once
	// own's work is done (handOff), so that it holds that work's steps.
	creators, own *background.Pending
}

type logKey struct{}

// openLog starts the invocation's log with the configuration it inherits, which it
// keeps for configure: its caller's (an in-process delegate or chain child of a plugin
// that logs), else the one of CNI_LOG_FILE and CNI_LOG_LEVEL.
func openLog(in *invocation) (*logged, error) {
	var err error
	c, ok := in.ctx.Value(logKey{}).(*invlog.Config)
	if !ok {
		c, err = invlog.FromEnv(in.args.LogFile, in.args.LogLevel)
	}
	in.inheritedLog = c
	return beginLog(in.ctx, c, in.args), in.tolerate(err, "the invocation log's environment")
}

// tolerate is what a misconfigured log (err) does to the command: DEL and GC, which
// clean up and need nothing of the config beyond the attachment, go on (the problem is
// reported on stderr as what is ignored); ADD, CHECK and STATUS fail, so the operator
// sees the typo.
func (in *invocation) tolerate(err error, what string) error {
	if err != nil && (in.args.Command == CmdDel || in.args.Command == CmdGC) {
		fmt.Fprintf(in.stderr, "%s: ignoring %s: %v\n", in.p.Name, what, err)
		return nil
	}
	return err
}

// beginLog starts the log of an invocation when cfg turns it on; nil otherwise.
func beginLog(ctx context.Context, cfg *invlog.Config, args Args) *logged {
	if !cfg.On() {
		return nil
	}
	parent, ok := tracectx.From(ctx)
	if !ok {
		parent, ok = tracectx.FromEnv(args.Env)
	}
	l := &logged{cfg: cfg}
	var span tracectx.Span
	if ok {
		span, l.parent = parent.Child(), parent.SpanID
	}
	l.rec = steps.New(time.Now(), span)
	return l
}

// configure applies the config's own "log" object (readConfig) over what the
// invocation inherited, starting the log if that turns it on, and sets the context the
// plugin runs under: carrying the recorder, the invocation's span and the configuration
// its in-process delegates inherit. A refused object changes nothing.
func (l *logged) configure(in *invocation) *logged {
	if in.logRefused {
		return l
	}
	if in.ownLog != nil {
		if cfg := invlog.Resolve(in.ownLog, in.inheritedLog); cfg.On() && (l == nil || *cfg != *l.cfg) {
			if l == nil {
				l = beginLog(in.ctx, cfg, in.args)
			} else {
				l.cfg = cfg
			}
		}
	}
	if l == nil {
		if steps.Of(in.ctx) != nil {
			in.ctx = steps.With(in.ctx, nil) // not the caller's steps: they are its own
		}
		return nil
	}
	l.net = in.conf
	in.ctx = context.WithValue(steps.With(in.ctx, l.rec), logKey{}, l.cfg)
	if span := l.rec.Span(); span.Valid() {
		in.ctx = tracectx.With(in.ctx, span)
	}
	return l
}

// ownWork gives a logged invocation whose background work joins its creator's Pending
// a Pending of its own under it, so that handOff can wait for just that work.
func (l *logged) ownWork(ctx context.Context, owned bool) context.Context {
	if l == nil || owned {
		return ctx
	}
	l.creators, l.own = background.PendingOf(ctx), new(background.Pending)
	return background.WithPending(ctx, l.own)
}

// waitWork waits for the work the callback left running, returning err joined with its
// errors. With the log on, the wait is a step, and an invocation whose creator waits
// for its work (ownWork) hands its line off to that work.
func (l *logged) waitWork(in *invocation, ctx context.Context, owned bool, wait func() error, res *result.Result, err error) error {
	var waiting *steps.Timer
	if l != nil && owned && background.PendingOf(ctx).Busy() {
		waiting = l.rec.Begin(steps.WaitPending)
	}
	if werr := waiting.Done(wait()); werr != nil {
		err = errors.Join(err, werr)
	}
	if l != nil && l.own != nil {
		l.handOff(in.p.Name, in.args, res, err, in.stderr)
	}
	return err
}

// handOff writes the line as part of the work the creator waits for, once the
// invocation's own share is done, with its error, which the creator gets as before.
func (l *logged) handOff(name string, args Args, res *result.Result, err error, stderr io.Writer) {
	l.creators.Go(func() error {
		werr := l.own.Wait()
		l.write(name, args, res, errors.Join(err, werr), stderr)
		return werr
	})
}

// finish writes the invocation's line unless handOff took it over (own work: ownWork).
func (l *logged) finish(in *invocation, res *result.Result, err error) {
	if l == nil || l.own != nil {
		return
	}
	l.write(in.p.Name, in.args, res, err, in.stderr)
}

// write writes the line. A failure to log is reported on stderr and never fails the
// plugin.
func (l *logged) write(name string, args Args, res *result.Result, err error, stderr io.Writer) {
	inv := invlog.Invocation{
		Plugin: name, Command: args.Command, Network: l.net.Name, ContainerID: args.ContainerID,
		Netns: args.Netns, IfName: args.IfName, CNIVersion: l.net.CNIVersion, CNIArgs: args.CNIArgs,
		Args: l.net.Args, RuntimeConfig: l.net.RuntimeConfig, Steps: l.rec, Parent: l.parent, Result: res, Err: err,
	}
	if werr := l.cfg.Write(inv); werr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, werr)
	}
}
