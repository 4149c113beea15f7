// Package tracectx is the W3C trace context an invocation runs under: read tolerantly
// from the TRACEPARENT, TRACESTATE and BAGGAGE environment variables (the carriers of
// OTEP 0258, which libcni sets for every plugin it execs when its caller has a span),
// carried in a context.Context, and handed on to every plugin we exec in the same
// variables, as libcni does. It is no tracing SDK: a span here is an id that the
// invocation log (internal/obs/invlog) writes down, nothing is exported while a plugin runs.
package tracectx

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strings"
)

// The environment variables that carry a trace context into a process.
const (
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
	EnvBaggage     = "BAGGAGE"
)

// Bounds on the pass-through headers (W3C: tracestate has at most 32 members of at
// most 256 bytes; baggage at most 8192 bytes). Longer values are dropped, not cut.
const (
	maxTracestate = 32 * 257
	maxBaggage    = 8192
)

// TraceID is a W3C trace-id; the zero value is invalid.
type TraceID [16]byte

// SpanID is a W3C parent-id (a span id); the zero value is invalid.
type SpanID [8]byte

// String is the id in lowercase hex, as traceparent writes it.
func (t TraceID) String() string { return hex.EncodeToString(t[:]) }

// IsZero reports whether t is the invalid all-zero id.
func (t TraceID) IsZero() bool { return t == TraceID{} }

// String is the id in lowercase hex, as traceparent writes it.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s is the invalid all-zero id.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// Span is a position in a trace: the trace, the span that is current (the parent of
// whatever starts under it), the flags, and the vendor state and baggage that travel
// with it unread. Baggage may carry personal data: it is passed on, never logged.
type Span struct {
	TraceID TraceID
	SpanID  SpanID
	Flags   byte
	State   string
	Baggage string
}

// FlagSampled is the W3C sampled flag.
const FlagSampled = 0x01

// Valid reports whether s names a trace and a span, the condition under which libcni
// injects a context at all.
func (s Span) Valid() bool { return !s.TraceID.IsZero() && !s.SpanID.IsZero() }

// Child returns a new span under s: the same trace, flags, state and baggage, a fresh
// span id.
func (s Span) Child() Span {
	c := s
	c.SpanID = NewSpanID()
	return c
}

// Traceparent formats s as a version-00 traceparent header:
// 00-<32 hex trace-id>-<16 hex span-id>-<2 hex flags>.
func (s Span) Traceparent() string {
	var b [55]byte
	copy(b[0:], "00-")
	hex.Encode(b[3:35], s.TraceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], s.SpanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{s.Flags})
	return string(b[:])
}

// Env returns env with s's variables appended: TRACEPARENT always, TRACESTATE and
// BAGGAGE when non-empty. Appended last, they win over any inherited ones, since
// exec.Cmd keeps the last of duplicate names (libcni relies on the same rule). An
// invalid s leaves env untouched.
func (s Span) Env(env []string) []string {
	if !s.Valid() {
		return env
	}
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		// Dropping the inherited ones keeps a stale TRACESTATE or BAGGAGE from outliving
		// a context that has none.
		k, _, _ := strings.Cut(kv, "=")
		if k != EnvTraceparent && k != EnvTracestate && k != EnvBaggage {
			out = append(out, kv)
		}
	}
	out = append(out, EnvTraceparent+"="+s.Traceparent())
	if s.State != "" {
		out = append(out, EnvTracestate+"="+s.State)
	}
	if s.Baggage != "" {
		out = append(out, EnvBaggage+"="+s.Baggage)
	}
	return out
}

// New starts a trace: a fresh trace id and root span id, sampled. The ids come from
// math/rand/v2's generator, which the runtime seeds per process; W3C asks ids to be
// random, not secret.
func New() Span {
	var s Span
	for s.TraceID.IsZero() {
		binary.BigEndian.PutUint64(s.TraceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(s.TraceID[8:], rand.Uint64())
	}
	s.SpanID = NewSpanID()
	s.Flags = FlagSampled
	return s
}

// NewSpanID returns a fresh non-zero span id.
func NewSpanID() SpanID {
	var id SpanID
	for id.IsZero() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// Parse reads the three carriers tolerantly: a traceparent that is not valid W3C gives
// ok false (never an error: a plugin must not fail on a runtime's malformed header),
// and a tracestate or baggage that is too long or holds control characters is dropped.
// Versions after 00 are read by their first four fields, as W3C asks.
func Parse(traceparent, tracestate, baggage string) (Span, bool) {
	s, ok := parseTraceparent(strings.TrimSpace(traceparent))
	if !ok {
		return Span{}, false
	}
	if len(tracestate) <= maxTracestate && printable(tracestate) {
		s.State = strings.TrimSpace(tracestate)
	}
	if len(baggage) <= maxBaggage && printable(baggage) {
		s.Baggage = strings.TrimSpace(baggage)
	}
	return s, true
}

// parseTraceparent reads the four fields of tp; version 00 has nothing after them.
func parseTraceparent(tp string) (s Span, ok bool) {
	if len(tp) < 55 || (len(tp) > 55 && tp[55] != '-') || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return Span{}, false
	}
	var ver, flags [1]byte
	if !decodeLowerHex(ver[:], tp[0:2]) || ver[0] == 0xff || (ver[0] == 0 && len(tp) != 55) {
		return Span{}, false
	}
	if !decodeLowerHex(s.TraceID[:], tp[3:35]) || !decodeLowerHex(s.SpanID[:], tp[36:52]) || !decodeLowerHex(flags[:], tp[53:55]) {
		return Span{}, false
	}
	s.Flags = flags[0]
	return s, s.Valid()
}

// FromEnv parses the carriers found in env (the last of each name wins, as a process
// would see them).
func FromEnv(env []string) (Span, bool) {
	var tp, ts, bg string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvTraceparent:
			tp = v
		case EnvTracestate:
			ts = v
		case EnvBaggage:
			bg = v
		}
	}
	if tp == "" {
		return Span{}, false
	}
	return Parse(tp, ts, bg)
}

// decodeLowerHex decodes exactly len(dst)*2 lowercase hex digits, as W3C requires
// (hex.Decode alone would take upper case too). s is at most 32 bytes, so its []byte
// copy stays on the stack.
func decodeLowerHex(dst []byte, s string) bool {
	if strings.Trim(s, "0123456789abcdef") != "" {
		return false
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

func printable(s string) bool {
	return !strings.ContainsFunc(s, func(c rune) bool { return c < 0x20 || c == 0x7f })
}

type spanKey struct{}

// With returns ctx carrying s as the current span: plugins exec'd under ctx get it as
// their parent (invoke.Exec), in-process ones start their span under it.
func With(ctx context.Context, s Span) context.Context {
	return context.WithValue(ctx, spanKey{}, s)
}

// From returns the current span of ctx, if it carries a valid one.
func From(ctx context.Context) (Span, bool) {
	s, ok := ctx.Value(spanKey{}).(Span)
	return s, ok && s.Valid()
}

// Ensure returns ctx with a current span: ctx's own, else the one of env's
// TRACEPARENT, else a new trace. The runtime side (the chain runner, `cni add`) calls
// it so that every operation is traced, as a runtime with a tracer would.
func Ensure(ctx context.Context, env []string) (context.Context, Span) {
	if s, ok := From(ctx); ok {
		return ctx, s
	}
	s, ok := FromEnv(env)
	if !ok {
		s = New()
	}
	return With(ctx, s), s
}
