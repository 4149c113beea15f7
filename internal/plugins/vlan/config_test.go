package vlan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

func TestLoadReadsEveryKey(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"vlan","master":"eth1",
		"vlanId":4094,"mtu":1400,"linkInContainer":true,"ipam":{"type":"static"}}`), ""))
	require.NoError(t, err)
	assert.Equal(t, "eth1", c.Master)
	assert.Equal(t, 4094, c.VLANID)
	assert.Equal(t, 1400, c.MTU)
	assert.True(t, c.LinkInContainer)
}

func TestLoadAcceptsVLANZero(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"vlan","master":"eth1","ipam":{"type":"static"}}`), ""))
	require.NoError(t, err)
	assert.Zero(t, c.VLANID, "priority-tagged frames, as the reference allows")
}

// FuzzLoad feeds the config loader hostile configs: it must never panic, must refuse
// with a config error, and what it accepts must be usable.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"vlan","master":"eth0","vlanId":100,"ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"vlan","master":"eth0","vlanId":0,"mtu":9000,"linkInContainer":true,"ipam":{"type":"dhcp"},"dns":{"nameservers":["10.0.0.53"]}}`,
		`{"master":"eth0","vlanId":5000,"ipam":{"type":"x"}}`,
		`{"master":"","vlanId":-1,"mtu":1e9}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		c, err := load(skeltest.Request(config, ""))
		if skeltest.Refused(t, config, err) {
			return
		}
		if c.VLANID < 0 || c.VLANID > 4094 {
			t.Fatalf("accepted vlanId %d", c.VLANID)
		}
		skeltest.RequireUsableMTU(t, c.MTU)
		if skel.ValidateIfName(c.Master) != nil {
			t.Fatalf("accepted master %q", c.Master)
		}
	})
}
