package macvlan_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	at "github.com/cnikit/cni/internal/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/cnierror"
)

func TestExecdBadInputGivesTheCodeAndFieldAndLeavesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := e.PluginDir()
	tests := []struct {
		name  string
		keys  map[string]any
		env   []string
		code  uint
		field string
	}{
		{"unknown mode", map[string]any{"mode": "switch"}, nil, cnierror.CodeInvalidConfig, "mode"},
		{"mtu above the master's", map[string]any{"mtu": 9000}, nil, cnierror.CodeInvalidConfig, "mtu"},
		{"master that does not exist", map[string]any{"master": "nosuch0"}, nil, cnierror.CodeInvalidConfig, "master"},
		{"bad capability mac", map[string]any{"runtimeConfig": map[string]any{"mac": "ff:ff:ff:ff:ff:ff"}}, nil, cnierror.CodeInvalidConfig, "runtimeConfig.mac"},
		{"bad CNI_ARGS MAC", nil, []string{"CNI_ARGS=IgnoreUnknown=1;MAC=xyz"}, cnierror.CodeInvalidConfig, "CNI_ARGS MAC"},
		{"mode of the wrong type", map[string]any{"mode": 3}, nil, cnierror.CodeInvalidConfig, "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := map[string]any{"master": at.Master}
			for k, v := range tt.keys {
				keys[k] = v
			}
			c := e.NewContainer()
			_, cerr := e.Exec(dir, "ADD", c.ID, c.NS.Path, e.Config(keys), tt.env...)
			require.NotNil(t, cerr, "ADD must fail")
			assert.Equal(t, tt.code, cerr.Code)
			assert.Contains(t, cerr.Msg, tt.field)
			e.AssertNothingLeft(t, c)
		})
	}
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

	var withPrev map[string]any
	require.NoError(t, json.Unmarshal(conf, &withPrev))
	withPrev["prevResult"] = json.RawMessage(out)
	b, _ := json.Marshal(withPrev)
	_, cerr = e.Exec(dir, "CHECK", c.ID, c.NS.Path, b)
	require.Nil(t, cerr)
	for range 2 {
		_, cerr = e.Exec(dir, "DEL", c.ID, c.NS.Path, conf)
		require.Nil(t, cerr)
	}
	e.AssertNothingLeft(t, c)
}

func TestLibcniAddCheckDelDelWithTheMacCapability(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.NewContainer()
	run := e.Libcni(fmt.Sprintf(`{
		"cniVersion": "1.1.0", "name": "testnet",
		"plugins": [{"type": "macvlan", "master": %q, "capabilities": {"mac": true},
			"ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]]}}]}`,
		at.Master, e.DataDir, at.Subnet), c, map[string]any{"mac": "02:aa:bb:cc:dd:ee"})
	require.NoError(t, run.AddErr)
	require.Len(t, run.Result.Interfaces, 1)
	assert.Equal(t, "02:aa:bb:cc:dd:ee", run.Result.Interfaces[0].Mac)
	assert.Equal(t, c.NS.Path, run.Result.Interfaces[0].Sandbox)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL twice")
	e.AssertNothingLeft(t, c)
}
