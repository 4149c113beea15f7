package skel

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
)

// slowDel is a plugin whose DEL leaves work running (as a link deletion does): the work
// sleeps, then marks itself done and returns fail.
func slowDel(done *atomic.Bool, fail error) *Plugin {
	return &Plugin{Name: "slow", Versions: version.All(), Del: func(req *Request) error {
		return background.Start(req.Context(), func() error {
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
		return background.Start(req.Context(), func() error { panic("kaboom in the background") })
	}}
	assertPanicReported(t, runPlugin(p, env("DEL"), conf), "boom: internal error: panic: kaboom in the background")

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
	var p background.Pending
	hold := &Plugin{Name: "hold", Versions: version.All(), Del: func(req *Request) error {
		return background.Start(req.Context(), func() error { <-release; return errors.New("late failure") })
	}}
	_, err = Invoke(background.WithPending(context.Background(), &p), hold, delArgs, []byte(conf), io.Discard)
	require.NoError(t, err, "the failure arrives through the caller's Pending")
	close(release)
	assert.EqualError(t, p.Wait(), "late failure")

	// background.WithPending(ctx, nil) hides the caller's Pending: Invoke waits again.
	done.Store(false)
	_, err = Invoke(background.WithPending(background.WithPending(context.Background(), &p), nil), slowDel(&done, nil), delArgs, []byte(conf), io.Discard)
	require.NoError(t, err)
	assert.True(t, done.Load())
}
