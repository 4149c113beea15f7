package daemon

import (
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A signal only cancels: an upkeep goroutine still running (or one an in-flight
// Allocate is about to start) must not be waited for here, concurrently with Serve's
// drain, but by Stop after Serve returns.
func TestASignalCancelsTheDaemonWithoutWaitingForItsGoroutines(t *testing.T) {
	d, _ := newTestDaemon(t)
	d.wg.Add(1) // an upkeep goroutine that has not seen the cancel yet
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	var got os.Signal
	d.cancelOnSignal(sigs, func(s os.Signal) { got = s })
	assert.Equal(t, syscall.SIGTERM, got)
	assert.Error(t, d.ctx.Err(), "the daemon's context ended")
	d.wg.Done()
}

// When Serve fails without a signal, run's Stop ends the signal watcher instead of
// leaving it blocked for the life of the process.
func TestTheSignalWatcherEndsWhenTheDaemonStops(t *testing.T) {
	d, _ := newTestDaemon(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.cancelOnSignal(make(chan os.Signal), func(os.Signal) { t.Error("no signal was sent") })
	}()
	d.Stop()
	<-done
}
