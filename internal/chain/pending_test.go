package chain_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// deleters are built-in plugins whose DEL leaves work running, as a link deletion
// does. The work of each finishes only once the work of all of them has started, so
// it finishes at all only when the runner lets it overlap.
type deleters struct {
	started sync.WaitGroup
	done    atomic.Int32
	fail    map[string]error // by plugin name
	boom    string           // plugin whose work panics
}

func newDeleters(names ...string) *deleters {
	d := &deleters{fail: map[string]error{}}
	d.started.Add(len(names))
	return d
}

// added is a runner whose plugins a, b and c are d's, and the attachment of their chain
// it added.
func (d *deleters) added(t *testing.T) (*chain.Runner, *chain.Network, chain.Attachment) {
	t.Helper()
	r := newRunner(t, t.TempDir())
	r.Builtin = d.lookup
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"a"},{"type":"b"},{"type":"c"}]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: testns.New(t).Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	return r, n, att
}

func (d *deleters) lookup(name string) *skel.Plugin {
	return &skel.Plugin{Name: name, Versions: version.All(),
		Add: func(req *skel.Request) (*result.Result, error) {
			if req.PrevResult != nil {
				return req.PrevResult, nil
			}
			return &result.Result{CNIVersion: req.Net.CNIVersion}, nil
		},
		Check: func(*skel.Request) error { return nil },
		Del: func(req *skel.Request) error {
			return background.Start(req.Context(), func() error {
				d.started.Done()
				waited := make(chan struct{})
				go func() { d.started.Wait(); close(waited) }()
				select {
				case <-waited:
				case <-time.After(time.Minute):
					return errors.New("the other plugins' work never started: it did not overlap")
				}
				time.Sleep(20 * time.Millisecond) // still running when a careless caller returned
				d.done.Add(1)
				if name == d.boom {
					panic("kaboom in " + name)
				}
				return d.fail[name]
			})
		},
	}
}

func TestRunnerDelOverlapsThePluginsWorkAndReturnsWhenAllIsDone(t *testing.T) {
	testns.RequireRoot(t)
	d := newDeleters("a", "b", "c")
	r, n, att := d.added(t)

	require.NoError(t, r.Del(context.Background(), n, att))
	assert.Equal(t, int32(3), d.done.Load(), "DEL returned before the work it started was done")
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

func TestRunnerDelReportsAFailureOfTheWorkAsItsPlugins(t *testing.T) {
	testns.RequireRoot(t)
	d := newDeleters("a", "b", "c")
	d.fail["b"] = errors.New(`link "eth0": delete: device or resource busy`)
	d.boom = "c"
	r, n, att := d.added(t)

	err := r.Del(context.Background(), n, att)
	assert.Equal(t, int32(3), d.done.Load())
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
	assert.ErrorContains(t, err, `plugin type="c" name="n" failed (delete): c: internal error: panic: kaboom in c`)
	assert.ErrorContains(t, err, `plugin type="b" name="n" failed (delete): link "eth0": delete: device or resource busy`)
	assert.Len(t, cacheFiles(t, r.CacheDir), 1, "kept for the runtime's next DEL")
}

// TestChainPluginDelOverlapsItsChildrensWork: the chain plugin, as a runtime execs it,
// lets its children's work overlap, answers once it is done, and names the child whose
// work failed.
func TestChainPluginDelOverlapsItsChildrensWork(t *testing.T) {
	testns.RequireRoot(t)
	d := newDeleters("a", "b")
	d.fail["a"] = errors.New("ifb busy")
	p := chain.Plugin(d.lookup)
	conf := `{"cniVersion":"1.1.0","name":"n","type":"chain","plugins":[{"type":"a"},{"type":"b"}]}`
	args := skel.Args{Command: skel.CmdDel, ContainerID: "c1", IfName: "eth0", Path: []string{t.TempDir()}}
	_, err := skel.Invoke(context.Background(), p, args, []byte(conf), nil)
	assert.Equal(t, int32(2), d.done.Load())
	assert.EqualError(t, err, "chain: a: ifb busy")
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
}
