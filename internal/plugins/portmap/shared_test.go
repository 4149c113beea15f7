package portmap

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/nftables"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestTwoAttachmentsMappingOneHostPort: a runtime that re-creates a sandbox before the
// old one's DEL maps a host port that is still mapped. Both ADDs succeed, as with the
// reference (the nftables backend used to fail the second with code 999); the first
// attachment answers; deleting either one leaves the other's mapping answering and
// passing CHECK; deleting both leaves nothing.
func TestTwoAttachmentsMappingOneHostPort(t *testing.T) {
	for _, backend := range backends {
		for _, delFirst := range []bool{true, false} {
			name := backend + "/del-second"
			if delFirst {
				name = backend + "/del-first"
			}
			t.Run(name, func(t *testing.T) {
				requireBackend(t, backend)
				t.Parallel()
				e := newEnv(t)
				first, second := e.container("ctr-old"), e.container("ctr-new")
				mappings := []PortMapping{
					{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
					{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"},
					{HostPort: 8083, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "10.77.0.1"},
				}
				confFirst := first.netconf(t, "net1", map[string]any{"backend": backend}, mappings)
				confSecond := second.netconf(t, "net1", map[string]any{"backend": backend}, mappings)
				require.NoError(t, e.invoke(skel.CmdAdd, first, confFirst))
				require.NoError(t, e.invoke(skel.CmdAdd, second, confSecond), "a host port mapped twice is accepted")
				require.NoError(t, e.invoke(skel.CmdCheck, first, confFirst))
				require.NoError(t, e.invoke(skel.CmdCheck, second, confSecond))
				require.NoError(t, e.invoke(skel.CmdAdd, second, confSecond), "a repeated ADD of the second")
				e.answers(first.id, "the first attachment wins")
				if backend == "nftables" {
					assert.Contains(t, e.ruleset(), nftSharedPrefix, "the shared keys go through shared chains")
				}

				gone, kept, keptConf := first, second, confSecond
				if !delFirst {
					gone, kept, keptConf = second, first, confFirst
				}
				require.NoError(t, e.invoke(skel.CmdDel, gone, []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
				e.answers(kept.id, "after the other's DEL")
				require.NoError(t, e.invoke(skel.CmdCheck, kept, keptConf))
				rules := e.ruleset()
				assert.NotContains(t, rules, attachment{net: "net1", cid: gone.id}.hash())
				assert.NotContains(t, rules, nftSharedPrefix, "one claimant left: the map element jumps to it straight")

				require.NoError(t, e.invoke(skel.CmdDel, kept, []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
				rules = e.ruleset()
				for _, c := range []*container{first, second} {
					assert.NotContains(t, rules, c.ip4)
					assert.NotContains(t, rules, c.ip6)
				}
				_, err := dialTCP(e.client, "10.77.0.1:8080")
				assert.Error(t, err, "the host port is closed after both DELs")
			})
		}
	}
}

// answers checks that every mapping of TestTwoAttachmentsMappingOneHostPort reaches the
// container id, in both families where it applies.
func (e *env) answers(id, msg string) {
	e.t.Helper()
	for _, tc := range []struct {
		addr string
		dial func(*env, string) (string, error)
	}{
		{"10.77.0.1:8080", func(e *env, a string) (string, error) { return dialTCP(e.client, a) }},
		{"[fd77::1]:8080", func(e *env, a string) (string, error) { return dialTCP(e.client, a) }},
		{"10.77.0.1:8081", func(e *env, a string) (string, error) { return dialUDP(e.client, a) }},
		{"10.77.0.1:8083", func(e *env, a string) (string, error) { return dialTCP(e.client, a) }},
	} {
		got, err := tc.dial(e, tc.addr)
		if assert.NoError(e.t, err, "%s: %s", msg, tc.addr) {
			assert.Equal(e.t, id, got, "%s: %s", msg, tc.addr)
		}
	}
}

// TestGCFindsAttachmentsBehindASharedHostPort: with snat off an attachment's only map
// elements may be shared ones; GC still finds a stale attachment there (by the owner
// comments of the shared chain's jumps) and removes it, and the valid one answers.
func TestGCFindsAttachmentsBehindASharedHostPort(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		stale, valid := e.container("ctr-stale"), e.container("ctr-valid")
		mappings := []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}}
		extra := map[string]any{"backend": backend, "snat": false}
		require.NoError(t, e.invoke(skel.CmdAdd, stale, stale.netconf(t, "net1", extra, mappings)))
		confValid := valid.netconf(t, "net1", extra, mappings)
		require.NoError(t, e.invoke(skel.CmdAdd, valid, confValid))
		gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap","cni.dev/valid-attachments":[{"containerID":"ctr-valid","ifname":"eth0"}]}`)
		require.NoError(t, e.invoke(skel.CmdGC, valid, gcConf))
		assert.NotContains(t, e.ruleset(), attachment{net: "net1", cid: stale.id}.hash())
		got, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err)
		assert.Equal(t, valid.id, got)
		require.NoError(t, e.invoke(skel.CmdCheck, valid, confValid))
	})
}

// TestDelCleansASharedHostPortDamagedByHand: the element of a shared host port is
// removed by hand, so the shared chain is reached by nothing but still jumps to both
// attachments' chains. DEL of one takes the slow path and removes its chains and its
// jump all the same; a repeated ADD of the other repairs it.
func TestDelCleansASharedHostPortDamagedByHand(t *testing.T) {
	e := newEnv(t)
	a, b := e.container("ctr-a"), e.container("ctr-b")
	mappings := []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}}
	confB := b.netconf(t, "net1", map[string]any{"backend": "nftables"}, mappings)
	require.NoError(t, e.invoke(skel.CmdAdd, a, a.netconf(t, "net1", map[string]any{"backend": "nftables"}, mappings)))
	require.NoError(t, e.invoke(skel.CmdAdd, b, confB))
	e.deletePortsElement(8080)
	assert.Error(t, e.invoke(skel.CmdCheck, b, confB))

	require.NoError(t, e.invoke(skel.CmdDel, a, []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)))
	rules := e.ruleset()
	assert.NotContains(t, rules, attachment{net: "net1", cid: a.id}.hash())
	assert.NotContains(t, rules, a.ip4)
	require.NoError(t, e.invoke(skel.CmdAdd, b, confB), "ADD repairs the attachment")
	require.NoError(t, e.invoke(skel.CmdCheck, b, confB))
	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err)
	assert.Equal(t, b.id, got)
	assert.NotContains(t, e.ruleset(), nftSharedPrefix)
}

// TestDelReleasesAKeyMappedTwiceByOneAttachmentInOneTransaction: hostIP "" and
// "0.0.0.0" name the same v4 key, and config does not merge them, so one attachment
// records two mappings of one key. DEL's fast path releases that key once: the one
// transaction succeeds (it used to queue two deletions of one element, fail with
// ENOENT and leave every DEL of such an attachment to the slow sweep) and leaves
// nothing.
func TestDelReleasesAKeyMappedTwiceByOneAttachmentInOneTransaction(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-a")
	mappings := []PortMapping{
		{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
		{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "0.0.0.0"},
	}
	require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": "nftables"}, mappings)))
	got, err := dialTCP(e.client, "10.77.0.1:8080")
	require.NoError(t, err)
	require.Equal(t, c.id, got)

	hash := attachment{net: "net1", cid: c.id}.hash()
	for _, v6 := range []bool{false, true} {
		f := newNFTFamily(v6)
		var st nftState
		e.host.Run(t, func() error {
			return nftBackend{}.inTransaction(func(conn *nftables.Conn) error {
				if st, err = f.stateOf(conn, hash); err != nil {
					return err
				}
				return f.queueRemove(conn, hash, st)
			})
		})
		if !v6 {
			assert.Len(t, st.maps, 2, "v4 records both mappings")
		}
	}
	rules := e.ruleset()
	assert.NotContains(t, rules, nftDNPrefix+hash)
	assert.NotContains(t, rules, c.ip4)
	assert.NotContains(t, rules, c.ip6)
	_, err = dialTCP(e.client, "10.77.0.1:8080")
	assert.Error(t, err, "the host port is closed")
}

// TestJumpsToFindsAClaimantInASharedChain: the one reading of a shared chain that a
// claim (ADD) and its check (CHECK) make tells a claimant's jump from another's.
func TestJumpsToFindsAClaimantInASharedChain(t *testing.T) {
	testns.RequireRoot(t)
	testns.RequireFirewallBinaries(t, "builds the shared chain with nft")
	host := testns.New(t)
	for _, cmd := range [][]string{
		{"add", "table", "ip", nftTableName},
		{"add", "chain", "ip", nftTableName, "dn-a"},
		{"add", "chain", "ip", nftTableName, "dn-b"},
		{"add", "chain", "ip", nftTableName, "sh-x"},
		{"add", "rule", "ip", nftTableName, "sh-x", "jump", "dn-a"},
	} {
		out, err := host.Exec(t, "nft", cmd...)
		require.NoError(t, err, out)
	}
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		f := newNFTFamily(false)
		has, err := f.jumpsTo(c, f.chain("sh-x"), "dn-a")
		require.NoError(t, err)
		assert.True(t, has, "dn-a claims through sh-x")
		has, err = f.jumpsTo(c, f.chain("sh-x"), "dn-b")
		require.NoError(t, err)
		assert.False(t, has, "dn-b does not")
		return nil
	})
}

// TestEachKeyVisitsEveryKeyOnce: two mappings of one host port share a map element, so
// a release or a claim must touch it once; a key already done is left out, and the
// first failure ends the walk.
func TestEachKeyVisitsEveryKeyOnce(t *testing.T) {
	f := newNFTFamily(false)
	target := netip.MustParseAddr("10.1.0.5")
	tcp8080 := nftMapping{mapping: mapping{proto: "tcp", hostPort: 8080, containerPort: 80}, target: target}
	tcp8080b := nftMapping{mapping: mapping{proto: "tcp", hostPort: 8080, containerPort: 81}, target: target}
	udp53 := nftMapping{mapping: mapping{proto: "udp", hostPort: 53, containerPort: 53}, target: target}
	onHostIP := nftMapping{mapping: mapping{proto: "tcp", hostPort: 8080, containerPort: 80, hostIP: netip.MustParseAddr("10.0.0.1")}, target: target}
	all := []nftMapping{tcp8080, tcp8080b, udp53, onHostIP}

	var seen []nftMapping
	done := map[string]bool{f.keyID(udp53): true}
	require.NoError(t, f.eachKey(all, done, func(m nftMapping) error { seen = append(seen, m); return nil }))
	assert.Equal(t, []nftMapping{tcp8080, onHostIP}, seen, "one call per key, none for a key already done")
	assert.Len(t, done, 3, "the keys visited are done now")

	calls := 0
	err := f.eachKey(all, map[string]bool{}, func(nftMapping) error { calls++; return errors.New("refused") })
	assert.EqualError(t, err, "refused")
	assert.Equal(t, 1, calls)
}
