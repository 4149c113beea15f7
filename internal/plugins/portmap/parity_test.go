package portmap

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// Conditions pick the backend when "backend" is unset: iptables arguments start with
// "-" or "!" (upstream #1114: `["!", "-d", "127.0.0.0/8"]` was taken for nft syntax),
// anything else is nft; conditions of the other syntax than an explicit backend are a
// config error naming the field.
func TestConditionsInIPTablesSyntaxPickIPTables(t *testing.T) {
	testns.FakeIPTablesTools(t) // iptables is chosen where its tools are installed
	conds := func(c ...string) *[]string { return &c }
	for _, tc := range []struct {
		name    string
		conf    Config
		backend netfilter.Backend
		err     string
	}{
		{"negation first", Config{ConditionsV4: conds("!", "-d", "127.0.0.0/8")}, netfilter.IPTables, ""},
		{"negation glued to the flag", Config{ConditionsV6: conds("!-s", "fd00::/8")}, netfilter.IPTables, ""},
		{"option first", Config{ConditionsV4: conds("-s", "10.0.0.0/8")}, netfilter.IPTables, ""},
		{"nft expression", Config{ConditionsV4: conds("ip saddr 10.0.0.0/8")}, netfilter.NFTables, ""},
		{"negation with an explicit nftables backend", Config{Backend: "nftables", ConditionsV4: conds("!", "-d", "127.0.0.0/8")}, "",
			"conditionsV4: conditions are in iptables syntax but the backend is nftables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSettings(&tc.conf)
			if tc.err != "" {
				require.Error(t, err)
				assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.backend, s.backend)
		})
	}
}

// A mapping with the unspecified hostIP 0.0.0.0 is a mapping on every IPv4 address of
// the host, and none of IPv6; CHECK counts it as ADD made it (upstream #1210 fixed the
// reference's nftables CHECK that failed on it).
func TestUnspecifiedHostIPMapsEveryAddressOfItsFamilyAndPassesCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": backend},
			[]PortMapping{{HostPort: 8084, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "0.0.0.0"}})
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		// The client's side of the host and the host's end of the container's veth.
		for _, addr := range []string{"10.77.0.1:8084", c.host + ":8084"} {
			got, err := dialTCP(e.client, addr)
			require.NoError(t, err, addr)
			assert.Equal(t, "ctr-a", got, "0.0.0.0 maps %s", addr)
		}
		_, err := dialTCP(e.client, "[fd77::1]:8084")
		assert.Error(t, err, "0.0.0.0 maps no IPv6 address")
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

// Only traffic to an address of the host is mapped: a connection that crosses the host
// to another container's own address on the host port reaches that container, not the
// one that published the port (upstream #1209: the reference's nftables backend DNATed
// transit traffic from v1.6.1 to v1.8.0, so a pod publishing UDP 53 took all DNS that
// crossed the node).
func TestTransitTrafficToAPublishedPortIsNotMapped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		publisher, other := e.container("ctr-a"), e.container("ctr-b")
		conf := publisher.netconf(t, "net1", map[string]any{"backend": backend},
			[]PortMapping{{HostPort: tcpPort, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, publisher, conf))
		got, err := dialTCP(e.client, "10.77.0.1:8000")
		require.NoError(t, err)
		assert.Equal(t, "ctr-a", got, "the host's own address is mapped")
		for _, addr := range []string{other.ip4 + ":8000", "[" + other.ip6 + "]:8000"} {
			got, err := dialTCP(e.client, addr)
			require.NoError(t, err, addr)
			assert.Equal(t, "ctr-b", got, "%s crosses the host unmapped", addr)
		}
	})
}
