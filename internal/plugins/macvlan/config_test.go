package macvlan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

func TestLoadReadsEveryKey(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"macvlan","master":"eth1",
		"mode":"vepa","mtu":1400,"mac":"02:00:00:00:00:01","bcqueuelen":100,"linkInContainer":true,"ipam":{}}`), ""))
	require.NoError(t, err)
	assert.Equal(t, "eth1", c.Master)
	assert.Equal(t, "vepa", modeName(c.mode))
	assert.Equal(t, 1400, c.MTU)
	assert.Equal(t, "02:00:00:00:00:01", c.mac.String())
	assert.Equal(t, uint32(100), c.BCQueueLen)
	assert.True(t, c.LinkInContainer)
}

func TestLoadDefaultsToBridgeModeAndNoMaster(t *testing.T) {
	c, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"macvlan"}`), ""))
	require.NoError(t, err)
	assert.Equal(t, "bridge", modeName(c.mode))
	assert.Empty(t, c.Master)
	assert.Nil(t, c.mac)
}

func TestLoadRefusesUnknownCNIArgs(t *testing.T) {
	_, err := load(skeltest.Request([]byte(`{"cniVersion":"1.1.0","name":"n","type":"macvlan"}`), "FOO=bar"))
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.From(err).Code)
	assert.ErrorContains(t, err, "FOO", "the error names the unknown argument")
}

// FuzzLoad feeds the config loader hostile configs and CNI_ARGS: it must never panic,
// must refuse with a config or environment error, and what it accepts must be usable.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"macvlan","master":"eth0","mode":"bridge","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"macvlan","mode":"passthru","mtu":9000,"linkInContainer":true,"ipam":{}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"macvlan","mac":"02:00:00:00:00:01","runtimeConfig":{"mac":"02:00:00:00:00:02"}}`,
		`{"cniVersion":"0.3.1","name":"n","type":"macvlan","bcqueuelen":4294967295,"mode":"source"}`,
		`{"master":"a/b","mode":"x","mtu":-3}`,
	} {
		f.Add([]byte(seed), "")
		f.Add([]byte(seed), "IgnoreUnknown=1;MAC=02:00:00:00:00:03")
	}
	f.Fuzz(func(t *testing.T, config []byte, cniArgs string) {
		c, err := load(skeltest.Request(config, cniArgs))
		if skeltest.Refused(t, config, err, cnierror.CodeInvalidConfig, cnierror.CodeInvalidEnv) {
			return
		}
		skeltest.RequireUsableMTU(t, c.MTU)
		if c.mac != nil && (len(c.mac) != 6 || c.mac[0]&1 != 0) {
			t.Fatalf("accepted mac %s", c.mac)
		}
		if c.Master != "" && skel.ValidateIfName(c.Master) != nil {
			t.Fatalf("accepted master %q", c.Master)
		}
	})
}
