package portmap

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/nfttest"
)

// damage is something done by hand to the shared chains of one family's table, which
// the table survives.
type damage struct {
	name string
	v6   bool
	do   func(c *nftables.Conn, f *nftFamily) error
	// broken is the path to the first pod's mapping that the damage cuts, if any.
	broken string
}

func flushChain(name string) func(c *nftables.Conn, f *nftFamily) error {
	return func(c *nftables.Conn, f *nftFamily) error {
		c.FlushChain(f.chain(name))
		return nil
	}
}

// deleteRule deletes the i-th rule of the chain by its handle (`nft delete rule ...
// handle N`).
func deleteRule(name string, i int) func(c *nftables.Conn, f *nftFamily) error {
	return func(c *nftables.Conn, f *nftFamily) error {
		rules, err := c.GetRules(f.table, f.chain(name))
		if err != nil {
			return err
		}
		if len(rules) <= i {
			return fmt.Errorf("chain %s has %d rules", name, len(rules))
		}
		return c.DelRule(rules[i])
	}
}

// appendForeignRule adds `ct original proto-dst 9999 counter` to the chain: a rule of
// someone else's, which google/nftables cannot read back (ct's direction).
func appendForeignRule(name string) func(c *nftables.Conn, f *nftFamily) error {
	return func(c *nftables.Conn, f *nftFamily) error {
		c.AddRule(&nftables.Rule{Table: f.table, Chain: f.chain(name),
			Exprs: nftexpr.Rule(nftexpr.CtOriginalProtoDstIs(9999), []expr.Any{&expr.Counter{}})})
		return nil
	}
}

func deleteChain(name string) func(c *nftables.Conn, f *nftFamily) error {
	return func(c *nftables.Conn, f *nftFamily) error {
		c.FlushChain(f.chain(name))
		c.DelChain(f.chain(name))
		return nil
	}
}

// TestNFTAddRepairsDamagedSharedChains: each shared chain flushed, each of their rules
// deleted, a hook chain deleted, the table kept: the first pod's mapping stops
// answering, and the ADD of another pod puts the layout back in its one transaction
// (also past a rule of someone else's that google/nftables cannot read),
// after which both pods' mappings answer and the first passes CHECK. Since ADD had
// declared the base layout only where the table was missing, one `nft flush chain`
// broke every mapping of the node until the table was deleted. An ADD that finds the
// layout intact reads it and sends nothing for it.
func TestNFTAddRepairsDamagedSharedChains(t *testing.T) {
	damages := []damage{
		{name: "flush hostports", do: flushChain(nftHostports), broken: "remote"},
		{name: "flush prerouting", do: flushChain("prerouting"), broken: "remote"},
		{name: "flush output", do: flushChain("output"), broken: "localhost"},
		{name: "flush postrouting", do: flushChain("postrouting"), broken: "localhost"},
		{name: "delete the hostip_ports dispatch", do: deleteRule(nftHostports, 0), broken: "remote hostIP"},
		{name: "delete the ports dispatch", do: deleteRule(nftHostports, 1), broken: "remote"},
		{name: "delete prerouting's rule", do: deleteRule("prerouting", 0), broken: "remote"},
		{name: "delete output's rule", do: deleteRule("output", 0), broken: "localhost"},
		{name: "delete postrouting's rule", do: deleteRule("postrouting", 0), broken: "localhost"},
		{name: "delete the postrouting chain", do: deleteChain("postrouting"), broken: "localhost"},
		{name: "a rule nobody can read in prerouting", do: appendForeignRule("prerouting")},
		{name: "flush ip6 hostports", v6: true, do: flushChain(nftHostports), broken: "remote v6"},
		{name: "delete ip6 prerouting's rule", v6: true, do: deleteRule("prerouting", 0), broken: "remote v6"},
	}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a, b := e.container("ctr-a"), e.container("ctr-b")
			nft := map[string]any{"backend": "nftables"}
			mapsA := []PortMapping{
				{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
				{HostPort: 8083, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "10.77.0.1"},
			}
			confA := a.netconf(t, "net1", nft, mapsA)
			require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
			paths := map[string]string{"remote": "10.77.0.1:8080", "remote hostIP": "10.77.0.1:8083",
				"remote v6": "[fd77::1]:8080", "localhost": "127.0.0.1:8080"}
			dial := func(addr string) (string, error) {
				if addr == paths["localhost"] {
					return dialTCP(e.host, addr)
				}
				return dialTCP(e.client, addr)
			}
			for _, addr := range paths {
				got, err := dial(addr)
				require.NoError(t, err, addr)
				require.Equal(t, a.id, got, addr)
			}

			nfttest.Apply(t, e.host, func(c *nftables.Conn) error { return d.do(c, newNFTFamily(d.v6)) })
			if d.broken != "" {
				_, err := dial(paths[d.broken])
				require.Error(t, err, "the damage cuts %s", paths[d.broken])
			}

			require.NoError(t, e.invoke(skel.CmdAdd, b, b.netconf(t, "net1", nft, []PortMapping{{HostPort: 9090, ContainerPort: tcpPort, Protocol: "tcp"}})))
			for _, addr := range paths {
				got, err := dial(addr)
				if assert.NoError(t, err, "after the other pod's ADD: %s", addr) {
					assert.Equal(t, a.id, got, addr)
				}
			}
			got, err := dialTCP(e.client, "10.77.0.1:9090")
			if assert.NoError(t, err, "the other pod's own mapping") {
				assert.Equal(t, b.id, got)
			}
			require.NoError(t, e.invoke(skel.CmdCheck, a, confA))
			assertBaseIntact(t, e)
		})
	}
}

func assertBaseIntact(t *testing.T, e *env) {
	t.Helper()
	require.NoError(t, e.host.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		for _, v6 := range []bool{false, true} {
			assert.True(t, newNFTFamily(v6).baseIntact(c), "the shared chains of the v6=%v table are as ADD writes them", v6)
		}
		return nil
	}))
}

// TestNFTAddOnAnIntactLayoutOnlyReadsIt: an ADD beside an intact base layout reads the
// shared chains (four small rule dumps per family) and sends only the attachment's
// own objects: rewriting the shared chains in every ADD, as the reference does, leaves
// their old rules for the kernel to free after an RCU grace period, which the next
// close of any nf_tables socket waits for (10-15 ms here, at the exit of an exec'd
// plugin).
func TestNFTAddOnAnIntactLayoutOnlyReadsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := e.container("ctr-a"), e.container("ctr-b")
	require.NoError(t, e.invoke(skel.CmdAdd, a, a.netconf(t, "net1", map[string]any{"backend": "nftables"}, standardMappings())))

	var r nftrecord.Recorder
	defer r.Close()
	conf := &Config{Backend: "nftables"}
	conf.RuntimeConfig.PortMappings = []PortMapping{{HostPort: 9090, ContainerPort: tcpPort, Protocol: "tcp"}}
	s, err := parseSettings(conf)
	require.NoError(t, err)
	v4, v6 := netip.MustParsePrefix(b.ip4+"/24"), netip.MustParsePrefix(b.ip6+"/64")
	require.NoError(t, e.host.Do(func() error {
		return nftBackend{conn: r.Option()}.add(context.Background(), attachment{net: "net1", cid: b.id}, s, s.families(v4, v6))
	}))
	sent := r.Sent()
	assert.Equal(t, 1, nftrecord.Batches(sent), "one transaction: %v", sent)
	var dumps int
	for _, q := range sent {
		if !q.Batch {
			assert.NotContains(t, []uint16{unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_NEWSET, unix.NFT_MSG_DELRULE}, q.Msg,
				"nothing of the base layout is declared or flushed: %v", sent)
		}
		if q.Msg == unix.NFT_MSG_GETRULE && q.Dump {
			dumps++
		}
	}
	assert.GreaterOrEqual(t, dumps, 8, "the four shared chains read in both families: %v", sent)
	got, err := dialTCP(e.client, "10.77.0.1:9090")
	require.NoError(t, err)
	assert.Equal(t, b.id, got)
}
