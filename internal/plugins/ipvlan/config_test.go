package ipvlan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

func TestLoadReadsEveryKey(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"ipvlan","master":"eth1",
		"mode":"l3s","mtu":1400,"linkInContainer":true}`), ""))
	require.NoError(t, err)
	assert.Equal(t, "eth1", c.Master)
	assert.Equal(t, "l3s", modeName(c.mode))
	assert.Equal(t, 1400, c.MTU)
	assert.True(t, c.LinkInContainer)
}

func TestLoadDefaultsToL2(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"ipvlan"}`), ""))
	require.NoError(t, err)
	assert.Equal(t, "l2", modeName(c.mode))
}

func TestMasterNameComesFromConfigThenPrevResult(t *testing.T) {
	one := &result.Result{Interfaces: []result.Interface{{Name: "net1"}}}
	c := &Config{Master: "eth1"}
	name, err := c.masterName(one)
	require.NoError(t, err)
	assert.Equal(t, "eth1", name, "the config wins")

	c.Master = ""
	name, err = c.masterName(one)
	require.NoError(t, err)
	assert.Equal(t, "net1", name)

	name, err = c.masterName(nil)
	require.NoError(t, err)
	assert.Empty(t, name, "not chained: the default route decides")

	_, err = c.masterName(&result.Result{Interfaces: []result.Interface{{Name: "a/b"}}})
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.From(err).Code, "a prevResult name is validated too")
}

// FuzzLoad feeds the config loader hostile configs: it must never panic, must refuse
// with a config error, and what it accepts must be usable.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"ipvlan","master":"eth0","mode":"l2","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"ipvlan","mode":"l3s","mtu":9000,"linkInContainer":true}`,
		`{"cniVersion":"1.0.0","name":"n","type":"ipvlan","prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}],"ips":[{"address":"10.0.0.2/24","interface":0}]}}`,
		`{"master":"..","mode":"L2","mtu":"big"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		c, err := load(skeltest.Request(config, ""))
		if skeltest.Refused(t, config, err) {
			return
		}
		if _, err := onelink.ParseMode(modeNames[:], modeName(c.mode), netlink.IPVLAN_MODE_L2, "ipvlan", ""); err != nil {
			t.Fatalf("accepted mode %v", c.mode)
		}
		skeltest.RequireUsableMTU(t, c.MTU)
		if c.Master != "" && skel.ValidateIfName(c.Master) != nil {
			t.Fatalf("accepted master %q", c.Master)
		}
	})
}
