package tracectx

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The W3C specification's own example.
const (
	exampleParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	exampleTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	exampleSpan   = "00f067aa0ba902b7"
)

func TestParseReadsTheW3CExample(t *testing.T) {
	s, ok := Parse(exampleParent, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "userId=alice")
	require.True(t, ok)
	assert.Equal(t, exampleTrace, s.TraceID.String())
	assert.Equal(t, exampleSpan, s.SpanID.String())
	assert.Equal(t, byte(FlagSampled), s.Flags)
	assert.Equal(t, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", s.State)
	assert.Equal(t, "userId=alice", s.Baggage)
	assert.Equal(t, exampleParent, s.Traceparent(), "formatting gives the header back")
}

func TestParseIgnoresMalformedTraceparents(t *testing.T) {
	for name, tp := range map[string]string{
		"empty":               "",
		"short":               "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"upper-case hex":      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
		"zero trace id":       "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"zero span id":        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"version ff":          "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"version 00 too long": exampleParent + "-extra",
		"bad separator":       "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"bad flags":           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
		"future, no dash":     "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
	} {
		t.Run(name, func(t *testing.T) {
			_, ok := Parse(tp, "", "")
			assert.False(t, ok)
		})
	}
}

func TestParseReadsLaterVersionsByTheirFirstFields(t *testing.T) {
	s, ok := Parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-brings", "", "")
	require.True(t, ok)
	assert.Equal(t, exampleTrace, s.TraceID.String())
	assert.Equal(t, "00-"+exampleTrace+"-"+exampleSpan+"-01", s.Traceparent(), "we speak version 00 onwards")
}

func TestParseDropsUnusableStateAndBaggage(t *testing.T) {
	s, ok := Parse(exampleParent, "a=1\nb=2", strings.Repeat("k=v,", 3000))
	require.True(t, ok, "the traceparent alone is usable")
	assert.Empty(t, s.State)
	assert.Empty(t, s.Baggage)
}

func TestChildKeepsTheTraceWithANewSpan(t *testing.T) {
	s, _ := Parse(exampleParent, "x=1", "")
	c := s.Child()
	assert.Equal(t, s.TraceID, c.TraceID)
	assert.NotEqual(t, s.SpanID, c.SpanID)
	assert.Equal(t, "x=1", c.State)
	assert.True(t, c.Valid())
}

func TestNewStartsAValidSampledTrace(t *testing.T) {
	a, b := New(), New()
	assert.True(t, a.Valid())
	assert.Equal(t, byte(FlagSampled), a.Flags)
	assert.NotEqual(t, a.TraceID, b.TraceID)
	back, ok := Parse(a.Traceparent(), "", "")
	require.True(t, ok)
	assert.Equal(t, a, back)
}

func TestEnvOverridesInheritedCarriers(t *testing.T) {
	s, _ := Parse(exampleParent, "", "")
	env := s.Env([]string{"PATH=/bin", "TRACEPARENT=00-11111111111111111111111111111111-2222222222222222-01", "TRACESTATE=stale=1", "BAGGAGE=old=1"})
	assert.Equal(t, []string{"PATH=/bin", "TRACEPARENT=" + exampleParent}, env,
		"a context without state or baggage drops the inherited ones")
	got, ok := FromEnv(env)
	require.True(t, ok)
	assert.Equal(t, s, got)

	s.State, s.Baggage = "rojo=1", "k=v"
	assert.Equal(t, []string{"TRACEPARENT=" + exampleParent, "TRACESTATE=rojo=1", "BAGGAGE=k=v"}, s.Env(nil))
	assert.Equal(t, []string{"A=1"}, Span{}.Env([]string{"A=1"}), "no valid span: env untouched")
}

func TestFromEnvTakesTheLastOfEachName(t *testing.T) {
	s, ok := FromEnv([]string{"TRACEPARENT=garbage", "TRACEPARENT=" + exampleParent})
	require.True(t, ok)
	assert.Equal(t, exampleSpan, s.SpanID.String())
	_, ok = FromEnv([]string{"PATH=/bin"})
	assert.False(t, ok)
}

func TestEnsureKeepsAGivenSpanOrStartsOne(t *testing.T) {
	given, _ := Parse(exampleParent, "", "")
	ctx, s := Ensure(With(context.Background(), given), nil)
	assert.Equal(t, given, s)
	got, _ := From(ctx)
	assert.Equal(t, given, got)

	_, s = Ensure(context.Background(), []string{"TRACEPARENT=" + exampleParent})
	assert.Equal(t, given, s, "the environment's context is the runtime's")

	ctx, s = Ensure(context.Background(), []string{"TRACEPARENT=bad"})
	assert.True(t, s.Valid(), "a new trace when none is usable")
	got, ok := From(ctx)
	require.True(t, ok)
	assert.Equal(t, s, got)
}

func FuzzParse(f *testing.F) {
	f.Add(exampleParent, "rojo=1", "k=v")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "", "")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, tp, ts, bg string) {
		s, ok := Parse(tp, ts, bg)
		if !ok {
			return
		}
		if !s.Valid() {
			t.Fatalf("Parse(%q) accepted an invalid span", tp)
		}
		back, ok := Parse(s.Traceparent(), s.State, s.Baggage)
		if !ok || back != s {
			t.Fatalf("round trip of %q: %+v, %v", tp, back, ok)
		}
	})
}

func TestParseAllocatesOnlyTheStateAndBaggageItKeeps(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := Parse(exampleParent, "", ""); !ok {
			t.Fatal("example not parsed")
		}
	})
	assert.Zero(t, allocs, "reading a traceparent is on every plugin's start-up")
}
