package plugintest

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// LibcniClient is the reference runtime library as a runtime uses it: one conflist and
// one attachment, the plugins exec'd from a plugin dir inside a host namespace.
type LibcniClient struct {
	t    testing.TB
	host *testns.NS
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
	rt   *libcni.RuntimeConf
}

// NewLibcni is a client of conflist for rt, exec'ing the plugins of pluginDir inside
// host, with a cache dir of its own.
func NewLibcni(t testing.TB, host *testns.NS, pluginDir, conflist string, rt *libcni.RuntimeConf) *LibcniClient {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(conflist))
	require.NoError(t, err)
	return &LibcniClient{t: t, host: host, cni: libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil),
		list: list, rt: rt}
}

func (c *LibcniClient) do(op func(ctx context.Context) error) error {
	c.t.Helper()
	var err error
	c.host.Run(c.t, func() error { err = op(context.Background()); return nil })
	return err
}

// Add runs ADD and returns its result as the spec's 1.x result.
func (c *LibcniClient) Add() (*types100.Result, error) {
	c.t.Helper()
	var res *types100.Result
	err := c.do(func(ctx context.Context) error {
		r, err := c.cni.AddNetworkList(ctx, c.list, c.rt)
		if err != nil {
			return err
		}
		res, err = types100.GetResult(r)
		return err
	})
	return res, err
}

// Check runs CHECK with the result libcni cached at ADD.
func (c *LibcniClient) Check() error {
	c.t.Helper()
	return c.do(func(ctx context.Context) error { return c.cni.CheckNetworkList(ctx, c.list, c.rt) })
}

// Del runs DEL.
func (c *LibcniClient) Del() error {
	c.t.Helper()
	return c.do(func(ctx context.Context) error { return c.cni.DelNetworkList(ctx, c.list, c.rt) })
}

// LibcniRun is what the reference runtime library saw of one attachment's life.
type LibcniRun struct {
	// Result is ADD's result, nil when ADD failed.
	Result *types100.Result
	// CheckErr is nil when ADD failed: a runtime checks only what it added.
	AddErr, CheckErr, DelErr, Del2Err error
}

// Libcni drives conflist through libcni as an independent client, exec'ing the plugins
// from pluginDir inside host, as a runtime does: ADD for rt, CHECK when ADD succeeded,
// then DEL (which follows a failed ADD too) and DEL again, as a retried teardown.
func Libcni(t testing.TB, host *testns.NS, pluginDir, conflist string, rt *libcni.RuntimeConf) LibcniRun {
	t.Helper()
	c := NewLibcni(t, host, pluginDir, conflist, rt)
	var run LibcniRun
	run.Result, run.AddErr = c.Add()
	if run.AddErr == nil {
		run.CheckErr = c.Check()
	}
	run.DelErr = c.Del()
	run.Del2Err = c.Del()
	return run
}
