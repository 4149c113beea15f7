package main

import (
	"context"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestLibcniDrivesLoopback uses the reference runtime library as an independent client:
// it execs our binary from CNI_PATH, parses our VERSION output, results and errors.
func TestLibcniDrivesLoopback(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.NewWithLoopback(t)
	ctr := testns.New(t)
	dir := testns.LinkPluginDir(t, "loopback")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	ctx := context.Background()

	info, err := cni.GetVersionInfo(ctx, "loopback")
	require.NoError(t, err)
	assert.Contains(t, info.SupportedVersions(), "1.1.0")
	assert.Contains(t, info.SupportedVersions(), "0.1.0")

	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"lonet","plugins":[{"type":"loopback"}]}`))
	require.NoError(t, err)
	rt := &libcni.RuntimeConf{ContainerID: "libcni-1", NetNS: ctr.Path, IfName: "eth0"}

	_, err = cni.ValidateNetworkList(ctx, list)
	require.NoError(t, err)

	host.Run(t, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		require.NoError(t, err)
		r, err := types100.GetResult(res)
		require.NoError(t, err)
		require.Len(t, r.Interfaces, 1)
		assert.Equal(t, "lo", r.Interfaces[0].Name)
		assert.Len(t, r.IPs, 2)
		require.NoError(t, cni.CheckNetworkList(ctx, list, rt))
		require.NoError(t, cni.DelNetworkList(ctx, list, rt))
		require.NoError(t, cni.DelNetworkList(ctx, list, rt), "DEL twice")
		require.NoError(t, cni.GCNetworkList(ctx, list, nil))
		require.NoError(t, cni.GetStatusNetworkList(ctx, list))
		return nil
	})
}

// TestLibcniSeesOurErrors checks that a failing plugin's error JSON reaches the client
// with its code.
func TestLibcniSeesOurErrors(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := testns.LinkPluginDir(t, "loopback")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"lonet","plugins":[{"type":"loopback"}]}`))
	require.NoError(t, err)
	rt := &libcni.RuntimeConf{ContainerID: "libcni-2", NetNS: "/proc/1/fd/999999", IfName: "eth0"}
	host.Run(t, func() error {
		_, err := cni.AddNetworkList(context.Background(), list, rt)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "does not exist")
		return nil
	})
}
