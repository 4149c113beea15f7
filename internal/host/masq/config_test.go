package masq

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestConfigResolvesFamiliesAndBackendFromTheReferenceKeys(t *testing.T) {
	testns.FakeIPTablesTools(t)
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

// ipMasqBackend iptables on a node without the iptables tools is nftables.
func TestConfigNamingIPTablesWithoutTheToolsIsNFTables(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	c := Config{IPMasq: true, IPMasqBackend: "iptables"}
	opts, err := c.MasqOptions()
	require.NoError(t, err)
	assert.Equal(t, netfilter.NFTables, opts.Backend)
}

func TestConfigRejectsAnUnknownBackendNamingTheField(t *testing.T) {
	c := Config{IPMasqBackend: "ebtables"}
	_, err := c.MasqOptions()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ipMasqBackend")
}
