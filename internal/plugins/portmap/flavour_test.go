package portmap

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestExecIPTablesBackendWithEitherFlavour runs the exec'd plugin with the tools of
// iptables-nft and of iptables-legacy first in its PATH: the mappings answer, CHECK
// passes, a repeated ADD changes nothing, an entry rule respelled by hand (comment first,
// ports in another order, which both flavours print as written) still counts for CHECK
// and ADD, and DEL leaves nothing of the attachment.
func TestExecIPTablesBackendWithEitherFlavour(t *testing.T) {
	testns.RequireRoot(t)
	for _, fl := range testns.IPTablesFlavours(t) {
		t.Run(fl.Name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.container("ctr-a")
			plugin := filepath.Join(testns.LinkPluginDir(t, "portmap"), "portmap")
			mappings := []PortMapping{
				{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
				{HostPort: 8082, ContainerPort: tcpPort, Protocol: "tcp"},
				{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"},
			}
			conf := c.netconf(t, "net1", map[string]any{"backend": "iptables"}, mappings)
			run := func(command string, conf []byte) error {
				_, err := execPluginWithPath(t, e.host, fl.PATH(), plugin, command, c.id, c.ns.Path, conf)
				return err
			}
			save := func() string { return fl.Rules(t, e.host, "nat") }

			require.NoError(t, run("ADD", conf))
			for _, addr := range []string{"10.77.0.1:8080", "[fd77::1]:8082"} {
				got, err := dialTCP(e.client, addr)
				if assert.NoError(t, err, addr) {
					assert.Equal(t, "ctr-a", got, addr)
				}
			}
			require.NoError(t, run("CHECK", conf))
			before := save()
			require.NoError(t, run("ADD", conf))
			assert.Equal(t, before, save(), "a repeated ADD changes nothing")

			o := attachment{net: "net1", cid: c.id}
			n := fl.RulePosition(t, e.host, "iptables", "nat", iptDNAT, "-p tcp ")
			out, err := e.host.Exec(t, fl.Tool("iptables"), "-t", "nat", "-R", iptDNAT, strconv.Itoa(n),
				"-m", "comment", "--comment", o.iptComment(), "-p", "tcp", "-m", "multiport", "--destination-ports", "8082,8080",
				"-j", iptDNPrefix+o.hash())
			require.NoError(t, err, out)
			respelled := save()
			require.NotEqual(t, before, respelled)
			require.NoError(t, run("CHECK", conf))
			require.NoError(t, run("ADD", conf))
			assert.Equal(t, respelled, save(), "ADD finds the respelled entry rule and adds nothing")

			require.NoError(t, run("DEL", []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
			after := save()
			for _, gone := range []string{o.hash(), c.ip4, c.ip6, `"ctr-a\"`} {
				assert.NotContains(t, after, gone)
			}
			_, err = dialTCP(e.client, "10.77.0.1:8080")
			assert.Error(t, err, "the host port is closed after DEL")
		})
	}
}
