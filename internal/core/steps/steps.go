// Package steps records how long the parts of one plugin invocation took (IPAM, link
// creation, addresses, routes, firewall batches, qdiscs, kernel waits) for the
// invocation log. The shared helpers that do that work record it themselves, from the
// Recorder their request's context carries, so plugins hold no timing code. With the
// log off there is no Recorder: Begin returns nil and End does nothing, with no clock
// read and no allocation.
package steps

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/core/tracectx"
)

// The names of the steps the shared helpers record, one vocabulary for every plugin so
// that a log can be searched by step.
const (
	IPAM       = "ipam"
	LinkCreate = "link create"
	LinkMove   = "link move"
	LinkDelete = "link delete"
	Addresses  = "addresses"
	Routes     = "routes"
	Firewall   = "firewall"
	Qdisc      = "qdisc"
	// The kernel waits: a link's operational state, IPv6 duplicate address detection,
	// and the background work (link deletions) a DEL waits for before it answers.
	WaitLinkUp  = "wait link up"
	WaitDAD     = "wait dad"
	WaitPending = "wait background"
)

// LinkUp (setting a created link up: a veth's host end, a tap) and LinkRename (giving
// a link made under a temporary name its own) are steps of their own so that the end of
// LinkCreate is a crash point before them (crashpoint.go).
const (
	LinkUp     = "link up"
	LinkRename = "link rename"
)

// Recorder collects the steps of one invocation. It is safe for concurrent use: steps
// of the background work of a DEL end on other goroutines.
type Recorder struct {
	start time.Time
	// span is the invocation's own span; each step gets a child when it is valid.
	span tracectx.Span

	mu       sync.Mutex
	steps    []Step
	warnings []string
}

// Step is one finished step.
type Step struct {
	Name string
	// Start is when it began, after the recorder's start; Duration how long it took.
	Start, Duration time.Duration
	// SpanID is the step's span, zero when the invocation has no trace.
	SpanID tracectx.SpanID
	// Err is the step's error message, "" when it succeeded.
	Err string
}

// New returns a recorder for an invocation that began at start, under span (which may
// be invalid: then the steps get no span ids).
func New(start time.Time, span tracectx.Span) *Recorder {
	return &Recorder{start: start, span: span}
}

// Start is when the invocation began.
func (r *Recorder) Start() time.Time { return r.start }

// Span is the invocation's span.
func (r *Recorder) Span() tracectx.Span { return r.span }

// Steps returns the finished steps in the order they began.
func (r *Recorder) Steps() []Step {
	r.mu.Lock()
	out := slices.Clone(r.steps)
	r.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Step) int { return int(a.Start - b.Start) })
	return out
}

// Warn records a warning the invocation gave (on stderr too) for its line: a config
// key no plugin reads, say. On a nil recorder it does nothing.
func (r *Recorder) Warn(msg string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.warnings = append(r.warnings, msg)
	r.mu.Unlock()
}

// Warnings returns the warnings recorded, in the order given.
func (r *Recorder) Warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.warnings)
}

// Begin starts a step called name. On a nil recorder it returns nil, on which End and
// Done do nothing (in a build with the crashpoint tag, a timer that records nothing but
// whose end is a crash point: crashpoint.go).
func (r *Recorder) Begin(name string) *Timer {
	if r == nil {
		return unrecorded(name)
	}
	t := &Timer{r: r, name: name, start: time.Now()}
	if r.span.Valid() {
		t.span = r.span.Child()
	}
	return t
}

// Timer is a step in progress.
type Timer struct {
	r     *Recorder
	name  string
	start time.Time
	span  tracectx.Span
}

// End finishes the step with the error *errp points at (nil for none), for use in a
// defer: defer steps.Begin(ctx, steps.IPAM).End(&err).
func (t *Timer) End(errp *error) {
	var err error
	if errp != nil {
		err = *errp
	}
	t.Done(err)
}

// Done finishes the step with err and returns err, for use inline:
// return t.Done(work()).
func (t *Timer) Done(err error) error {
	if t == nil {
		return err
	}
	if t.r != nil {
		t.record(err)
	}
	stepEnded(t.name)
	return err
}

// record appends the finished step to its recorder.
func (t *Timer) record(err error) {
	s := Step{Name: t.name, Start: t.start.Sub(t.r.start), Duration: time.Since(t.start), SpanID: t.span.SpanID}
	if err != nil {
		s.Err = err.Error()
	}
	t.r.mu.Lock()
	t.r.steps = append(t.r.steps, s)
	t.r.mu.Unlock()
}

// Context returns ctx with the step's span as the current one, so that a plugin
// exec'd or invoked during the step is its child. Without a trace it returns ctx.
func (t *Timer) Context(ctx context.Context) context.Context {
	if t == nil || !t.span.Valid() {
		return ctx
	}
	return tracectx.With(ctx, t.span)
}

type recorderKey struct{}

// With returns ctx carrying r (nil hides a recorder ctx carries: an in-process delegate
// that logs nothing must not write into its caller's steps).
func With(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// Of returns the recorder ctx carries, or nil.
func Of(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Begin starts a step on the recorder of ctx; nil, doing nothing, when there is none.
func Begin(ctx context.Context, name string) *Timer {
	return Of(ctx).Begin(name)
}
