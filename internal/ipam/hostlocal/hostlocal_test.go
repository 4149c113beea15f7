package hostlocal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddThenDelReleasesTheAddress(t *testing.T) {
	n := newNetwork(t, map[string]any{"ranges": [][]map[string]any{{{"subnet": "10.1.0.0/24"}}}})
	res := n.mustAdd("c1", "eth0")
	assert.Equal(t, []string{"10.1.0.2/24"}, addrs(res))
	assert.Equal(t, "10.1.0.1", res.IPs[0].Gateway.String())
	assert.Equal(t, map[string]string{"10.1.0.2": "c1\r\neth0"}, n.reservations())
	require.NoError(t, n.del("c1", "eth0"))
	assert.Empty(t, n.reservations())
	require.NoError(t, n.del("c1", "eth0"))
}
