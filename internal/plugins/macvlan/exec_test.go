package macvlan_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	at "github.com/cnikit/cni/internal/attachment/attachmenttest"
	pt "github.com/cnikit/cni/internal/plugintest"
)

func TestExecdBadInputGivesTheCodeAndFieldAndLeavesNothing(t *testing.T) {
	t.Parallel()
	suite.ExecdBadInputGivesTheCodeAndFieldAndLeavesNothing(t, []at.BadInput{
		{Name: "unknown mode", Keys: map[string]any{"mode": "switch"}, Field: "mode"},
		{Name: "mtu above the master's", Keys: map[string]any{"mtu": 9000}, Field: "mtu"},
		{Name: "master that does not exist", Keys: map[string]any{"master": "nosuch0"}, Field: "master"},
		{Name: "bad capability mac", Keys: map[string]any{"runtimeConfig": map[string]any{"mac": "ff:ff:ff:ff:ff:ff"}}, Field: "runtimeConfig.mac"},
		{Name: "bad CNI_ARGS MAC", CNIArgs: "IgnoreUnknown=1;MAC=xyz", Field: "CNI_ARGS MAC"},
		{Name: "mode of the wrong type", Keys: map[string]any{"mode": 3}, Field: "mode"},
	})
}

func TestExecdAddCheckDelLikeARuntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := e.PluginDir()
	conf := e.Config(map[string]any{"master": at.Master, "mac": "02:11:22:33:44:55"})
	c := e.NewContainer()
	out, cerr := e.Exec(dir, "ADD", c.ID, c.NS.Path, conf)
	require.Nil(t, cerr)
	var res struct {
		CNIVersion string `json:"cniVersion"`
		Interfaces []struct{ Name, Mac, Sandbox string }
		IPs        []struct {
			Address   string
			Interface int
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "1.1.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 1)
	assert.Equal(t, "eth0", res.Interfaces[0].Name)
	assert.Equal(t, "02:11:22:33:44:55", res.Interfaces[0].Mac)
	assert.Equal(t, c.NS.Path, res.Interfaces[0].Sandbox)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.90.0.10/24", res.IPs[0].Address)

	_, cerr = e.Exec(dir, "CHECK", c.ID, c.NS.Path, pt.WithPrevJSON(t, conf, []byte(out)))
	require.Nil(t, cerr)
	for range 2 {
		_, cerr = e.Exec(dir, "DEL", c.ID, c.NS.Path, conf)
		require.Nil(t, cerr)
	}
	e.AssertNothingLeft(t, c)
}

func TestLibcniAddCheckDelDelWithTheMacCapability(t *testing.T) {
	t.Parallel()
	run := suite.LibcniAddCheckDelDel(t, map[string]any{"capabilities": map[string]any{"mac": true}},
		map[string]any{"mac": "02:aa:bb:cc:dd:ee"})
	assert.Equal(t, "02:aa:bb:cc:dd:ee", run.Result.Interfaces[0].Mac)
}
