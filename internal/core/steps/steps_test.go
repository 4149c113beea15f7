package steps

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/tracectx"
)

func TestStepsAreRecordedInTheOrderTheyBegan(t *testing.T) {
	r := New(time.Now(), tracectx.Span{})
	ctx := With(context.Background(), r)
	outer := Begin(ctx, IPAM)
	inner := Begin(ctx, Addresses)
	time.Sleep(time.Millisecond)
	require.NoError(t, inner.Done(nil))
	err := errors.New("no addresses left")
	outer.End(&err)

	got := r.Steps()
	require.Len(t, got, 2)
	assert.Equal(t, IPAM, got[0].Name, "ordered by start, not by end")
	assert.Equal(t, "no addresses left", got[0].Err)
	assert.Equal(t, Addresses, got[1].Name)
	assert.Empty(t, got[1].Err)
	assert.GreaterOrEqual(t, got[1].Duration, time.Millisecond)
	assert.GreaterOrEqual(t, got[0].Duration, got[1].Duration)
	assert.True(t, got[0].SpanID.IsZero(), "no trace, no span ids")
}

func TestStepsGetChildSpansOfTheInvocation(t *testing.T) {
	span := tracectx.New()
	r := New(time.Now(), span)
	ctx := With(context.Background(), r)
	tm := Begin(ctx, IPAM)
	sub, ok := tracectx.From(tm.Context(ctx))
	require.True(t, ok, "a delegate run during the step is the step's child")
	assert.Equal(t, span.TraceID, sub.TraceID)
	assert.NotEqual(t, span.SpanID, sub.SpanID)
	tm.Done(nil)
	assert.Equal(t, sub.SpanID, r.Steps()[0].SpanID)
}

func TestNoRecorderCostsNothing(t *testing.T) {
	ctx := context.Background()
	var err error
	allocs := testing.AllocsPerRun(1000, func() {
		tm := Begin(ctx, LinkCreate)
		tm.End(&err)
		_ = tm.Done(err)
		_ = tm.Context(ctx)
	})
	assert.Zero(t, allocs)
	assert.Nil(t, Begin(ctx, LinkCreate))
	assert.Nil(t, Begin(With(ctx, nil), LinkCreate), "a hidden recorder is none")
}

func TestConcurrentStepsAreAllKept(t *testing.T) {
	r := New(time.Now(), tracectx.New())
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r.Begin(LinkDelete).Done(nil)
			}
		}()
	}
	wg.Wait()
	assert.Len(t, r.Steps(), 16*50)
}
