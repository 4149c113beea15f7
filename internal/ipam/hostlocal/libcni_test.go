package hostlocal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLibcniDrivesTheBinary runs the real binary from the reference runtime library:
// ADD, CHECK, GC with valid attachments, STATUS on an exhausted range, DEL.
func TestLibcniDrivesTheBinary(t *testing.T) {
	dir := filepath.Dir(hostLocalBinary(t))
	n := newNetwork(t, obj{"subnet": "10.6.0.0/29"}) // .2-.6
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"plugins":[{"type":"host-local","ipam":{"type":"host-local","subnet":"10.6.0.0/29","dataDir":%q}}]}`,
		n.name, n.dataDir)
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	require.NoError(t, err)
	c := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	ctx := context.Background()
	rt := func(id string) *libcni.RuntimeConf {
		return &libcni.RuntimeConf{ContainerID: id, NetNS: "/var/run/netns/absent", IfName: "eth0"}
	}

	for i := 0; i < 5; i++ {
		_, err := c.AddNetworkList(ctx, list, rt(fmt.Sprintf("c%d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, c.CheckNetworkList(ctx, list, rt("c0")))

	err = c.GetStatusNetworkList(ctx, list)
	var cniErr *types.Error
	require.True(t, errors.As(err, &cniErr), "STATUS on a full range: %v", err)
	assert.Equal(t, uint(50), cniErr.Code)

	require.NoError(t, c.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{
		{ContainerID: "c1", IfName: "eth0"}, {ContainerID: "c3", IfName: "eth0"},
	}}))
	assert.Equal(t, []string{"10.6.0.3", "10.6.0.5"}, sortedKeys(n.reservations()))
	require.NoError(t, c.GetStatusNetworkList(ctx, list))

	for _, id := range []string{"c1", "c3", "c3"} {
		require.NoError(t, c.DelNetworkList(ctx, list, rt(id)))
	}
	assert.Empty(t, n.reservations())
}
