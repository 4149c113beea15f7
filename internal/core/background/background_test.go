package background_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/panics"
)

func TestStartOutsideAProcessRunsAtOnce(t *testing.T) {
	ran := false
	err := background.Start(context.Background(), func() error { ran = true; return errors.New("now") })
	assert.True(t, ran)
	assert.EqualError(t, err, "now")

	err = background.Start(context.Background(), func() error { panic("here") })
	var pe *panics.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "here", pe.Value)
}

func TestStartUnderAPendingJoinsIt(t *testing.T) {
	var p background.Pending
	ctx := background.WithPending(context.Background(), &p)
	release := make(chan struct{})
	require.NoError(t, background.Start(ctx, func() error { <-release; return errors.New("late") }),
		"the error arrives through the Pending")
	assert.True(t, p.Busy())
	require.NoError(t, background.Start(ctx, func() error { panic("boom") }))
	close(release)
	err := p.Wait()
	assert.ErrorContains(t, err, "late")
	var pe *panics.Error
	require.ErrorAs(t, err, &pe, "a panic of the work is one of its errors")

	// WithPending(ctx, nil) hides the Pending: Start runs at once again.
	assert.EqualError(t, background.Start(background.WithPending(ctx, nil), func() error { return errors.New("now") }), "now")
}

func TestOwnKeepsThePendingTheContextBrought(t *testing.T) {
	var p background.Pending
	ctx := background.WithPending(context.Background(), &p)
	got, wait, owned := background.Own(ctx)
	assert.False(t, owned)
	assert.Same(t, &p, background.PendingOf(got))
	assert.NoError(t, wait())

	got, wait, owned = background.Own(context.Background())
	require.True(t, owned)
	own := background.PendingOf(got)
	require.NotNil(t, own)
	assert.False(t, own.Busy(), "nothing started yet")
	own.Go(func() error { return errors.New("done") })
	assert.EqualError(t, wait(), "done", "wait waits for the Pending Own made")
}

func TestPendingWorkRunsConcurrently(t *testing.T) {
	// Each piece of work finishes only once all four are running: run in turn, they
	// would never finish.
	var p background.Pending
	var running sync.WaitGroup
	running.Add(4)
	for range 4 {
		p.Go(func() error { running.Done(); running.Wait(); return nil })
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		assert.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the work ran one piece after the other")
	}
}
