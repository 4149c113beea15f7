package skel

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/panics"
	"github.com/cnikit/cni/internal/core/version"
)

// slowDel is a plugin whose DEL leaves work running (as a link deletion does): the work
// sleeps, then marks itself done and returns fail.
func slowDel(done *atomic.Bool, fail error) *Plugin {
	return &Plugin{Name: "slow", Versions: version.All(), Del: func(req *Request) error {
		return Start(req.Context(), func() error {
			time.Sleep(50 * time.Millisecond)
			done.Store(true)
			return fail
		})
	}}
}

var delArgs = Args{Command: CmdDel, ContainerID: "abc", IfName: "eth0", Path: []string{"/opt/cni/bin"}}

func TestRunAnswersOnlyOnceTheWorkLeftRunningIsDone(t *testing.T) {
	var done atomic.Bool
	r := runPlugin(slowDel(&done, nil), env("DEL"), conf)
	assert.Equal(t, run{}, r)
	assert.True(t, done.Load(), "the runtime deletes the netns once DEL answered: the work must be over")
}

func TestAFailureOfTheWorkLeftRunningIsTheCommandsError(t *testing.T) {
	var done atomic.Bool
	r := runPlugin(slowDel(&done, errors.New(`link "eth0": delete: device busy`)), env("DEL"), conf)
	assert.Equal(t, 1, r.code)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInternal, e.Code)
	assert.Equal(t, `link "eth0": delete: device busy`, e.Msg)

	// The callback's own error and the work's both reach the runtime, the callback's
	// code first.
	p := slowDel(&done, errors.New("link gone wrong"))
	del := p.Del
	p.Del = func(req *Request) error {
		return errors.Join(del(req), cnierror.New(cnierror.CodeTryAgainLater, "rules busy"))
	}
	r = runPlugin(p, env("DEL"), conf)
	e = decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeTryAgainLater, e.Code)
	assert.Contains(t, e.Msg, "rules busy")
	assert.Contains(t, e.Msg, "link gone wrong")
}

func TestAPanicOfTheWorkLeftRunningIsAnInternalError(t *testing.T) {
	p := &Plugin{Name: "boom", Versions: version.All(), Del: func(req *Request) error {
		return Start(req.Context(), func() error { panic("kaboom in the background") })
	}}
	r := runPlugin(p, env("DEL"), conf)
	assert.Equal(t, 1, r.code)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInternal, e.Code)
	assert.Contains(t, e.Msg, "boom: internal error: panic: kaboom in the background")
	assert.Contains(t, r.stderr, "goroutine", "the stack goes to stderr for the operator")

	_, err := Invoke(context.Background(), p, delArgs, []byte(conf), io.Discard)
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
}

func TestInvokeWaitsUnlessTheCallerBroughtAPending(t *testing.T) {
	var done atomic.Bool
	_, err := Invoke(context.Background(), slowDel(&done, nil), delArgs, []byte(conf), io.Discard)
	require.NoError(t, err)
	assert.True(t, done.Load(), "without a Pending of the caller, Invoke waits itself")

	// A caller with a Pending (the chain runner, a plugin delegating in-process) gets
	// the work handed over, and waits once for the work of all its plugins.
	release := make(chan struct{})
	var p Pending
	hold := &Plugin{Name: "hold", Versions: version.All(), Del: func(req *Request) error {
		return Start(req.Context(), func() error { <-release; return errors.New("late failure") })
	}}
	_, err = Invoke(WithPending(context.Background(), &p), hold, delArgs, []byte(conf), io.Discard)
	require.NoError(t, err, "the failure arrives through the caller's Pending")
	close(release)
	assert.EqualError(t, p.Wait(), "late failure")

	// WithPending(ctx, nil) hides the caller's Pending: Invoke waits again.
	done.Store(false)
	_, err = Invoke(WithPending(WithPending(context.Background(), &p), nil), slowDel(&done, nil), delArgs, []byte(conf), io.Discard)
	require.NoError(t, err)
	assert.True(t, done.Load())
}

func TestStartOutsideAProcessRunsAtOnce(t *testing.T) {
	ran := false
	err := Start(context.Background(), func() error { ran = true; return errors.New("now") })
	assert.True(t, ran)
	assert.EqualError(t, err, "now")

	err = Start(context.Background(), func() error { panic("here") })
	var pe *panics.Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "here", pe.Value)
}

func TestPendingWorkRunsConcurrently(t *testing.T) {
	// Each piece of work finishes only once all four are running: run in turn, they
	// would never finish.
	var p Pending
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
