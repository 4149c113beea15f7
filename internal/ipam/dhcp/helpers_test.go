package dhcp_test

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/result"
)

func resultDefaultRoute() result.Route {
	return result.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr(dhcptest.ServerIP)}
}

// withValid returns conf for GC with the eth0 attachments of the containers ids valid.
func withValid(t testing.TB, conf []byte, ids ...string) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	valid := []map[string]string{}
	for _, id := range ids {
		valid = append(valid, map[string]string{"containerID": id, "ifname": "eth0"})
	}
	c["cni.dev/valid-attachments"] = valid
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
