package masq

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/netfilter"
	"github.com/cnikit/cni/internal/skel"
)

func TestConfigResolvesFamiliesAndBackendFromTheReferenceKeys(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		want       Options
		masq       bool
	}{
		{"off", `{}`, Options{}, false},
		{"ipMasq both families", `{"ipMasq":true,"ipMasqBackend":"iptables"}`,
			Options{Backend: netfilter.IPTables, IPv4: true, IPv6: true}, true},
		{"per-family override", `{"ipMasq":true,"ipMasqIPv6":false,"ipMasqBackend":"nftables"}`,
			Options{Backend: netfilter.NFTables, IPv4: true}, true},
		{"one family without ipMasq", `{"ipMasqIPv6":true,"ipMasqBackend":"iptables"}`,
			Options{Backend: netfilter.IPTables, IPv6: true}, true},
		{"backend set, masquerade off", `{"ipMasqBackend":"nftables"}`,
			Options{Backend: netfilter.NFTables}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			require.NoError(t, json.Unmarshal([]byte(tc.conf), &c))
			assert.Equal(t, tc.masq, c.Masquerading())
			opts, err := c.MasqOptions()
			require.NoError(t, err)
			assert.Equal(t, tc.want, opts)
		})
	}
}

func TestConfigRejectsAnUnknownBackendNamingTheField(t *testing.T) {
	c := Config{IPMasqBackend: "ebtables"}
	_, err := c.MasqOptions()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ipMasqBackend")
}

// TestLoadForDelTearsDownWhenTheKeysDoNotDecode: DEL reads the keys it needs; keys of
// the wrong type give the caller's all-on teardown and a line on stderr, never an error.
func TestLoadForDelTearsDownWhenTheKeysDoNotDecode(t *testing.T) {
	type delConf struct {
		Config
		Extra bool `json:"extra"`
	}
	teardown := delConf{Config: Config{IPMasq: true}, Extra: true}
	var stderr strings.Builder
	req := &skel.Request{Net: skel.NetConf{Type: "bridge"}, Stderr: &stderr,
		Config: []byte(`{"type":"bridge","ipMasq":"yes","ipMasqBackend":"nftables"}`)}
	assert.Equal(t, teardown, LoadForDel(req, teardown))
	assert.Contains(t, stderr.String(), "bridge: invalid network config")
	assert.Contains(t, stderr.String(), "tearing down")

	stderr.Reset()
	req.Config = []byte(`{"type":"bridge","ipMasq":false,"ipMasqBackend":"nftables"}`)
	assert.Equal(t, delConf{Config: Config{IPMasqBackend: "nftables"}}, LoadForDel(req, teardown))
	assert.Empty(t, stderr.String())
}
