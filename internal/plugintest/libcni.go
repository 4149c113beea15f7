package plugintest

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testns"
)

// LibcniRun is what the reference runtime library saw of one attachment's life.
type LibcniRun struct {
	// Result is ADD's result, nil when ADD failed.
	Result                            *types100.Result
	AddErr, CheckErr, DelErr, Del2Err error
}

// Libcni drives conflist through libcni as an independent client, exec'ing the plugins
// from pluginDir inside host: ADD for rt, then (when ADD succeeded) CHECK, DEL and DEL
// again, as a runtime that retries a teardown does.
func Libcni(t testing.TB, host *testns.NS, pluginDir, conflist string, rt *libcni.RuntimeConf) LibcniRun {
	t.Helper()
	cni := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(conflist))
	require.NoError(t, err)
	ctx := context.Background()
	var run LibcniRun
	host.Run(t, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		if run.AddErr = err; err != nil {
			return nil
		}
		if run.Result, err = types100.GetResult(res); err != nil {
			return err
		}
		run.CheckErr = cni.CheckNetworkList(ctx, list, rt)
		run.DelErr = cni.DelNetworkList(ctx, list, rt)
		run.Del2Err = cni.DelNetworkList(ctx, list, rt)
		return nil
	})
	return run
}
