package macvlan_test

import (
	"encoding/json"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	at "github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

func TestExecdAddCheckDelLikeARuntime(t *testing.T) {
	t.Parallel()
	e := suite.New(t)
	dir := e.PluginDir()
	conf := e.Config(map[string]any{"master": at.Master, "mac": "02:11:22:33:44:55"})
	c := e.NewContainer()
	out, cerr := e.Exec(dir, "ADD", c.ID, c.NS.Path, conf)
	require.Nil(t, cerr)
	// Decoded as a runtime decodes it, with the reference library's result type.
	var res types100.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "1.1.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 1)
	assert.Equal(t, "eth0", res.Interfaces[0].Name)
	assert.Equal(t, "02:11:22:33:44:55", res.Interfaces[0].Mac)
	assert.Equal(t, c.NS.Path, res.Interfaces[0].Sandbox)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.90.0.10/24", res.IPs[0].Address.String())
	assert.Equal(t, types100.Int(0), res.IPs[0].Interface, "the address is eth0's")
	// What the result says is what the kernel has.
	assert.Equal(t, "02:11:22:33:44:55", macvlanIn(t, c).HardwareAddr.String())
	assert.Equal(t, []string{"10.90.0.10/24"}, c.Addrs(t))

	_, cerr = e.Exec(dir, "CHECK", c.ID, c.NS.Path, pt.WithPrevJSON(t, conf, []byte(out)))
	require.Nil(t, cerr)
	for range 2 {
		_, cerr = e.Exec(dir, "DEL", c.ID, c.NS.Path, conf)
		require.Nil(t, cerr)
	}
	e.AssertNothingLeft(t, c)
	_, cerr = e.Exec(dir, "CHECK", c.ID, c.NS.Path, pt.WithPrevJSON(t, conf, []byte(out)))
	assert.NotNil(t, cerr, "CHECK after DEL")
}
