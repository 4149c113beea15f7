package portmap

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/foreigntables"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestNFTDelSendsOnlyWhatTheAttachmentHas: DEL of an attachment reads its own chains
// and sends one transaction per family it has mappings in, and nothing else. A rule
// dump of a missing chain answers nothing rather than ENOENT; DEL took that for an
// empty chain, sent the deletion of a chain that was not there, had it refused and
// swept the whole table (every map and chain read), for every pod without mappings,
// for every DEL after the first, and for the IPv6 family of every IPv4-only pod.
func TestNFTDelSendsOnlyWhatTheAttachmentHas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mapped, v4only, bare := e.container("ctr-mapped"), e.container("ctr-v4"), e.container("ctr-bare")
	nft := map[string]any{"backend": "nftables"}
	delOf := func(t *testing.T, c *container) []nftrecord.Request {
		t.Helper()
		var r nftrecord.Recorder
		defer r.Close()
		b := nftBackend{conn: r.Option()}
		require.NoError(t, e.host.Do(func() error {
			_, err := b.del(context.Background(), attachment{net: "net1", cid: c.id}.hash())
			return err
		}))
		return r.Sent()
	}

	// Before any table exists, then beside another attachment's mappings.
	assertOnlyLookups(t, delOf(t, bare), "no table yet")
	require.NoError(t, e.invoke(skel.CmdAdd, mapped, mapped.netconf(t, "net1", nft, standardMappings())))
	assertOnlyLookups(t, delOf(t, bare), "a pod without mappings beside a mapped one")

	v4conf := v4only.netconf(t, "net1", nft, []PortMapping{{HostPort: 9090, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "10.77.0.1"}})
	require.NoError(t, e.invoke(skel.CmdAdd, v4only, v4conf))
	sent := delOf(t, v4only)
	assert.Equal(t, 1, nftrecord.Batches(sent), "one transaction, for the IPv4 family alone: %v", sent)
	assertNoSweep(t, sent)
	assertOnlyLookups(t, delOf(t, v4only), "the second DEL")

	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err)
	assert.Equal(t, "ctr-mapped", got, "the mapped pod is untouched")
	require.NoError(t, e.invoke(skel.CmdCheck, mapped, mapped.netconf(t, "net1", nft, standardMappings())))
}

// assertOnlyLookups checks that sent holds lookups of the attachment's chains alone:
// no transaction and no sweep.
func assertOnlyLookups(t *testing.T, sent []nftrecord.Request, when string) {
	t.Helper()
	assert.Zero(t, nftrecord.Batches(sent), "%s: no transaction for an attachment without mappings: %v", when, sent)
	assertNoSweep(t, sent)
	for _, q := range sent {
		assert.Contains(t, []uint16{unix.NFT_MSG_GETRULE, unix.NFT_MSG_GETCHAIN}, q.Msg, "%s: %v", when, sent)
	}
	assert.LessOrEqual(t, len(sent), 4, "%s: a rule dump and a chain lookup per family: %v", when, sent)
}

// assertNoSweep checks that nothing read whole maps or the table's chain list, which
// only the sweep does.
func assertNoSweep(t *testing.T, sent []nftrecord.Request) {
	t.Helper()
	for _, q := range sent {
		whole := q.Dump && (q.Msg == unix.NFT_MSG_GETSETELEM || q.Msg == unix.NFT_MSG_GETCHAIN)
		assert.False(t, whole, "the sweep ran: %v", sent)
	}
}

// TestNFTAddDeclaresTheBaseOnlyWithoutTheTable: the first ADD declares the table, its
// maps and the shared chains; later ADDs send only the attachment's own chains, rules
// and elements (every ADD used to rewrite the shared chains: 29 messages instead of
// 11), both families in one transaction, as DEL removes them (they took one each); an
// ADD after the table was deleted by hand declares it again, and its mapping answers.
func TestNFTAddDeclaresTheBaseOnlyWithoutTheTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := e.container("ctr-a"), e.container("ctr-b"), e.container("ctr-c")
	nft := map[string]any{"backend": "nftables"}
	addOf := func(t *testing.T, ctr *container, port int) []nftrecord.Request {
		t.Helper()
		var r nftrecord.Recorder
		defer r.Close()
		b := nftBackend{conn: r.Option()}
		conf := &Config{Backend: "nftables"}
		conf.RuntimeConfig.PortMappings = []PortMapping{{HostPort: port, ContainerPort: tcpPort, Protocol: "tcp"}}
		s, err := parseSettings(conf)
		require.NoError(t, err)
		v4, v6 := netip.MustParsePrefix(ctr.ip4+"/24"), netip.MustParsePrefix(ctr.ip6+"/64")
		require.NoError(t, e.host.Do(func() error {
			return b.add(context.Background(), attachment{net: "net1", cid: ctr.id}, s, s.families(v4, v6))
		}))
		return r.Sent()
	}
	declares := func(sent []nftrecord.Request) bool {
		for _, q := range sent {
			if !q.Batch && (q.Msg == unix.NFT_MSG_NEWTABLE || q.Msg == unix.NFT_MSG_NEWSET) {
				return true
			}
		}
		return false
	}
	assert.True(t, declares(addOf(t, a, 8080)), "the first ADD declares the base")
	sent := addOf(t, b, 8081)
	assert.False(t, declares(sent), "the table is there: %v", sent)
	assert.LessOrEqual(t, len(sent), 30, "the shared chains read, the attachment's own objects sent, in two families: %v", sent)
	assert.Equal(t, 1, nftrecord.Batches(sent), "both families in one transaction: %v", sent)
	var r nftrecord.Recorder
	defer r.Close()
	require.NoError(t, e.host.Do(func() error {
		_, err := nftBackend{conn: r.Option()}.del(context.Background(), attachment{net: "net1", cid: b.id}.hash())
		return err
	}))
	assert.Equal(t, 1, nftrecord.Batches(r.Sent()), "DEL of both families in one transaction: %v", r.Sent())

	nfttest.Apply(t, e.host, func(c *nftables.Conn) error {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftTableName})
		return nil
	})
	assert.True(t, declares(addOf(t, c, 8082)), "the table is gone: declared again")
	got, err := dialTCP(e.client, "10.77.0.1:8082")
	require.NoError(t, err)
	assert.Equal(t, "ctr-c", got)
	require.NoError(t, e.invoke(skel.CmdCheck, c, c.netconf(t, "net1", nft, []PortMapping{{HostPort: 8082, ContainerPort: tcpPort, Protocol: "tcp"}})))
}

// TestNFTSweepReadsNothingOfKubeProxysTable: the slow path (state that does not match
// its records: here the element of a host port two attachments share, removed by
// hand, leaving the shared chain reached by nothing) reads our maps and our table's
// rules, never the family's chains, which hold kube-proxy's table: beside 1,000 of its
// Services it sends and receives what it does beside 10, and still finds the orphaned
// shared chain that jumps to the attachment.
func TestNFTSweepReadsNothingOfKubeProxysTable(t *testing.T) {
	testns.RequireRoot(t)
	gone, kept := attachment{net: "net1", cid: "ctr-gone"}, attachment{net: "net1", cid: "ctr-kept"}
	conf := &Config{Backend: "nftables"}
	conf.RuntimeConfig.PortMappings = []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}}
	s, err := parseSettings(conf)
	require.NoError(t, err)
	sweep := func(t *testing.T, services int) (*testns.NS, []nftrecord.Request, int) {
		host := testns.New(t)
		foreigntables.KubeProxyNFT(t, host, services)
		require.NoError(t, host.Do(func() error {
			for i, o := range []attachment{gone, kept} {
				v4 := netip.MustParsePrefix(fmt.Sprintf("10.%d.1.2/24", i+1))
				if err := (nftBackend{}).add(context.Background(), o, s, s.families(v4, netip.Prefix{})); err != nil {
					return err
				}
			}
			return nil
		}))
		nfttest.Apply(t, host, func(c *nftables.Conn) error {
			return c.SetDeleteElements(newNFTFamily(false).ports, []nftables.SetElement{{Key: nftexpr.Key([]byte{6}, nftexpr.Port(8080))}})
		})
		var r nftrecord.Recorder
		defer r.Close()
		require.NoError(t, host.Do(func() error {
			return nftBackend{conn: r.Option()}.inTransaction(func(c *nftables.Conn) error { return newNFTFamily(false).sweep(c, gone.hash()) })
		}))
		return host, r.Sent(), r.Received()
	}
	_, sentSmall, receivedSmall := sweep(t, 10)
	host, sent, received := sweep(t, 1000)
	for _, q := range sent {
		assert.False(t, q.Dump && q.Msg == unix.NFT_MSG_GETCHAIN, "a dump of the family's chains: %v", sent)
	}
	assert.Equal(t, sentSmall, sent)
	assert.Equal(t, receivedSmall, received, "beside 10 Services and 1,000")
	// As before: the attachment's chains go, and the shared chain that no element
	// reaches any more with them; the other attachment's ADD repairs its way in
	// (TestDelCleansASharedHostPortDamagedByHand).
	rs := nfttest.Ruleset(t, host)
	assert.False(t, strings.Contains(rs, gone.hash()), "the swept attachment's chains are gone")
	assert.False(t, strings.Contains(rs, "chain "+nftSharedPrefix), "the orphaned shared chain is gone")
	assert.True(t, strings.Contains(rs, "chain "+nftDNPrefix+kept.hash()), "the other attachment's chain stays")
}
