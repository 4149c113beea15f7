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
	handedOff     bool
}

type logKey struct{}

// inheritedLog is the log configuration an invocation gets when its config has no "log"
// object: its caller's (an in-process delegate or chain child of a plugin that logs),
// else the one of CNI_LOG_FILE and CNI_LOG_LEVEL.
func inheritedLog(ctx context.Context, args Args) (*invlog.Config, error) {
	if c, ok := ctx.Value(logKey{}).(*invlog.Config); ok {
		return c, nil
	}
	return invlog.FromEnv(args.LogFile, args.LogLevel)
}

// lenient says whether a command goes on when the log is misconfigured: DEL and GC,
// which clean up and need nothing of the config beyond the attachment (the problem is
// still reported on stderr). ADD, CHECK and STATUS fail, so the operator sees the typo.
func lenient(command string) bool { return command == CmdDel || command == CmdGC }

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

// configure applies the config's own "log" object over what the invocation inherited,
// starting the log if that turns it on, and returns the log and the context the plugin
// runs under: carrying the recorder, the invocation's span and the configuration its
// in-process delegates inherit. A bad "log" object is an error for the command unless
// it is lenient.
func (l *logged) configure(ctx context.Context, inherited *invlog.Config, conf NetConf, args Args, stderr io.Writer, name string) (*logged, context.Context, error) {
	if len(conf.Log) > 0 {
		own, err := invlog.ParseConfig(conf.Log)
		if err != nil && !lenient(args.Command) {
			return l, ctx, err
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: ignoring the log object: %v\n", name, err)
		}
		if cfg := invlog.Resolve(own, inherited); cfg.On() && (l == nil || *cfg != *l.cfg) {
			if l == nil {
				l = beginLog(ctx, cfg, args)
			} else {
				l.cfg = cfg
			}
		}
	}
	if l == nil {
		if steps.Of(ctx) != nil {
			ctx = steps.With(ctx, nil) // not the caller's steps: they are its own
		}
		return nil, ctx, nil
	}
	l.net = conf
	ctx = context.WithValue(steps.With(ctx, l.rec), logKey{}, l.cfg)
	if span := l.rec.Span(); span.Valid() {
		ctx = tracectx.With(ctx, span)
	}
	return l, ctx, nil
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

// handOff writes the line, for an invocation whose creator waits for its background
// work, as part of that work: once the invocation's own share is done, with its error,
// which the creator gets as before.
func (l *logged) handOff(name string, args Args, res *result.Result, err error, stderr io.Writer) {
	if l == nil || l.own == nil {
		return
	}
	l.handedOff = true
	l.creators.Go(func() error {
		werr := l.own.Wait()
		l.write(name, args, res, errors.Join(err, werr), stderr)
		return werr
	})
}

// begin starts a step of the invocation itself (nil when the log is off).
func (l *logged) begin(name string) *steps.Timer {
	if l == nil {
		return nil
	}
	return l.rec.Begin(name)
}

// finish writes the invocation's line unless handOff took it over.
func (l *logged) finish(name string, args Args, res *result.Result, err error, stderr io.Writer) {
	if l == nil || l.handedOff {
		return
	}
	l.write(name, args, res, err, stderr)
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
