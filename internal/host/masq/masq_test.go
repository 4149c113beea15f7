package masq

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var backends = []netfilter.Backend{netfilter.IPTables, netfilter.NFTables}

// forEachBackend runs test once per backend, in parallel, each in a world of its own.
func forEachBackend(t *testing.T, test func(t *testing.T, w *world, backend netfilter.Backend)) {
	for _, backend := range backends {
		t.Run(string(backend), func(t *testing.T) {
			t.Parallel()
			test(t, newWorld(t), backend)
		})
	}
}

// dualStack is what most tests ask for: masquerade both families through backend.
func dualStack(backend netfilter.Backend) Options {
	return Options{Backend: backend, IPv4: true, IPv6: true}
}

// world is a host netns with one container behind it and one external machine in
// front of it. The external machine routes the container subnets back through the
// host, so an unmasqueraded connection works too and shows the container's address.
type world struct {
	host, ctr, ext *testns.NS
	att            Attachment
}

var (
	ctr4  = netip.MustParsePrefix("10.1.0.5/24")
	ctr6  = netip.MustParsePrefix("fd01::5/64")
	host4 = netip.MustParseAddr("192.168.7.1")
	host6 = netip.MustParseAddr("fd07::1")
	ext4  = netip.MustParseAddr("192.168.7.2")
	ext6  = netip.MustParseAddr("fd07::2")
)

func newWorld(t *testing.T) *world {
	t.Helper()
	testns.RequireRoot(t)
	w := &world{host: testns.NewWithLoopback(t), ctr: testns.NewWithLoopback(t), ext: testns.NewWithLoopback(t)}
	w.att = Attachment{Network: "net1", ContainerID: "c1", IfName: "eth0", IPs: []netip.Prefix{ctr4, ctr6}}
	testns.Veth(t, w.host, "hc", []string{"10.1.0.1/24", "fd01::1/64"}, w.ctr, "eth0", []string{ctr4.String(), ctr6.String()})
	testns.Veth(t, w.host, "he", []string{"192.168.7.1/24", "fd07::1/64"}, w.ext, "eth0", []string{"192.168.7.2/24", "fd07::2/64"})
	testns.Route(t, w.ctr, "eth0", "0.0.0.0/0", "10.1.0.1")
	testns.Route(t, w.ctr, "eth0", "::/0", "fd01::1")
	testns.Route(t, w.ext, "eth0", "10.1.0.0/16", "192.168.7.1")
	testns.Route(t, w.ext, "eth0", "fd01::/16", "fd07::1")
	w.host.Run(t, func() error {
		for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
			if err := os.WriteFile(f, []byte("1"), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	return w
}

// peer connects from the container to the external machine and returns the source
// address the external machine saw.
func (w *world) peer(t *testing.T, to netip.Addr) netip.Addr {
	t.Helper()
	var ln net.Listener
	w.ext.Run(t, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(to, 0).String())
		return err
	})
	defer ln.Close()
	seen := make(chan netip.Addr, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			seen <- netip.Addr{}
			return
		}
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		c.Close()
	}()
	w.ctr.Run(t, func() error {
		var c net.Conn
		var err error
		// Neighbour discovery of a just-made IPv6 link can fail once on a loaded
		// machine (EHOSTUNREACH after its three solicitations): try again, as a client
		// would; a masquerade that is wrong answers with the wrong address, not this.
		for try := 0; try < 3; try++ {
			if c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); !errors.Is(err, syscall.EHOSTUNREACH) {
				break
			}
		}
		if err != nil {
			return err
		}
		return c.Close()
	})
	return <-seen
}

func (w *world) do(t *testing.T, fn func(ctx context.Context) error) {
	t.Helper()
	w.host.Run(t, func() error { return fn(context.Background()) })
}

// ruleset prints both backends' state of the host namespace.
func (w *world) ruleset(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := w.host.Exec(t, cmd, "-t", "nat")
		require.NoError(t, err, out)
		b.WriteString(out)
	}
	out, err := w.host.Exec(t, "nft", "list", "ruleset")
	require.NoError(t, err, out)
	b.WriteString(out)
	return b.String()
}

func TestSetupMasqueradesBehindTheHostAddress(t *testing.T) {
	forEachBackend(t, func(t *testing.T, w *world, backend netfilter.Backend) {
		assert.Equal(t, ctr4.Addr(), w.peer(t, ext4), "without masquerade the container's own address arrives")
		opts := dualStack(backend)
		w.do(t, func(ctx context.Context) error { return Setup(ctx, w.att, opts) })
		assert.Equal(t, host4, w.peer(t, ext4))
		assert.Equal(t, host6, w.peer(t, ext6))
		w.do(t, func(ctx context.Context) error { return Check(ctx, w.att, opts) })
	})
}

func TestIPv4OnlyLeavesIPv6Alone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, w *world, backend netfilter.Backend) {
		w.do(t, func(ctx context.Context) error {
			return Setup(ctx, w.att, Options{Backend: backend, IPv4: true})
		})
		assert.Equal(t, host4, w.peer(t, ext4))
		assert.Equal(t, ctr6.Addr(), w.peer(t, ext6))
		assert.NotContains(t, w.ruleset(t), "fd01:", "no IPv6 state at all")
	})
}

func TestTeardownWithoutAddressesLeavesNothingOfTheAttachment(t *testing.T) {
	forEachBackend(t, func(t *testing.T, w *world, backend netfilter.Backend) {
		other := Attachment{Network: "net1", ContainerID: "c2", IfName: "eth0",
			IPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.6/24"), netip.MustParsePrefix("fd01::6/64")}}
		opts := dualStack(backend)
		w.do(t, func(ctx context.Context) error {
			if err := Setup(ctx, w.att, opts); err != nil {
				return err
			}
			if err := Setup(ctx, w.att, opts); err != nil { // a repeated ADD changes nothing
				return err
			}
			return Setup(ctx, other, opts)
		})
		before := w.ruleset(t)
		require.Contains(t, before, "10.1.0.5")
		if backend == netfilter.IPTables {
			save, err := w.host.Exec(t, "iptables-save", "-t", "nat")
			require.NoError(t, err)
			assert.Equal(t, 1, strings.Count(save, "-s 10.1.0.5/32"), "a second Setup does not duplicate")
			assert.Equal(t, 2, strings.Count(save, "-A "+iptChainName("net1", "c1")), save)
		} else {
			assert.Equal(t, 1, strings.Count(before, "10.1.0.5 : goto"), "a second Setup does not duplicate")
			assert.Equal(t, 1, strings.Count(before, "ips=10.1.0.5,fd01::5 net=net1 id=c1 if=eth0"), before)
		}

		w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
		after := w.ruleset(t)
		for _, gone := range []string{"10.1.0.5", "fd01::5", iptChainName("net1", "c1"), nftChainName("net1", "c1", "eth0"), `id: \"c1\"`, "id=c1"} {
			assert.NotContains(t, after, gone)
		}
		assert.Contains(t, after, "10.1.0.6", "the other attachment stays")
		assert.Equal(t, ctr4.Addr(), w.peer(t, ext4))
		w.do(t, func(ctx context.Context) error {
			assert.Error(t, Check(ctx, w.att, opts))
			assert.NoError(t, Check(ctx, other, opts))
			return Teardown(ctx, "net1", "c1", "eth0") // twice: still fine
		})
	})
}

// referenceIPTables writes the reference plugins' iptables masquerade of w.att (as
// v1.9 writes it, both families), plus the extra nat rules of each family's script.
func referenceIPTables(t *testing.T, w *world, extra4, extra6 string) {
	t.Helper()
	chain := iptChainName("net1", "c1")
	comment := `"name: \"net1\" id: \"c1\""`
	for _, v := range []struct{ cmd, src, subnet, mcast, extra string }{
		{"iptables-restore", "10.1.0.5", "10.1.0.0/24", "224.0.0.0/4", extra4},
		{"ip6tables-restore", "fd01::5", "fd01::/64", "ff00::/8", extra6},
	} {
		script := fmt.Sprintf("*nat\n:%[1]s - [0:0]\n-A POSTROUTING -s %[2]s -m comment --comment %[5]s -j %[1]s\n"+
			"-A %[1]s -d %[3]s -m comment --comment %[5]s -j ACCEPT\n"+
			"-A %[1]s ! -d %[4]s -m comment --comment %[5]s -j MASQUERADE\n"+
			"%[6]sCOMMIT\n", chain, v.src, v.subnet, v.mcast, comment, v.extra)
		w.host.Run(t, execIn(v.cmd, script))
	}
}

// referenceNFTables writes the reference plugins' nftables masquerade (v1.6+) of
// containers of net1, each given as its id and one address with its subnet's length.
func referenceNFTables(t *testing.T, w *world, cidIPs ...[2]string) {
	t.Helper()
	script := "add table inet cni_plugins_masquerade\n" +
		"add chain inet cni_plugins_masquerade masq_checks\n" +
		"add chain inet cni_plugins_masquerade postrouting { type nat hook postrouting priority srcnat; }\n" +
		"add rule inet cni_plugins_masquerade postrouting ip daddr == 224.0.0.0/4 return\n" +
		"add rule inet cni_plugins_masquerade postrouting ip6 daddr == ff00::/8 return\n" +
		"add rule inet cni_plugins_masquerade postrouting goto masq_checks\n"
	for _, ci := range cidIPs {
		cid, ip := ci[0], netip.MustParsePrefix(ci[1])
		fam := "ip"
		if ip.Addr().Is6() {
			fam = "ip6"
		}
		script += fmt.Sprintf("add rule inet cni_plugins_masquerade masq_checks %[1]s saddr == %[2]s %[1]s daddr != %[3]s masquerade comment \"%[4]s, net: net1, if: eth0, id: %[5]s\"\n",
			fam, ip.Addr(), ip.Masked(), refInstanceHash("net1", "eth0", cid), cid)
	}
	w.host.Run(t, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

func TestTeardownRemovesTheReferencePluginsRules(t *testing.T) {
	w := newWorld(t)
	chain := iptChainName("net1", "c1")
	require.Equal(t, 28, len(chain))
	referenceIPTables(t, w, "-A POSTROUTING -s 10.1.0.0/24 -j RETURN\n", "-A POSTROUTING -s fd01::/64 -j RETURN\n")
	assert.Equal(t, host4, w.peer(t, ext4), "the written rules work")
	w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
	after := w.ruleset(t)
	assert.NotContains(t, after, chain)
	assert.Contains(t, after, "-A POSTROUTING -s 10.1.0.0/24 -j RETURN", "unrelated rules stay")
	assert.Contains(t, after, "-A POSTROUTING -s fd01::/64 -j RETURN")
	assert.Equal(t, ctr4.Addr(), w.peer(t, ext4))
}

func TestGCRemovesExactlyTheStaleAttachments(t *testing.T) {
	forEachBackend(t, func(t *testing.T, w *world, backend netfilter.Backend) {
		opts := dualStack(backend)
		atts := []Attachment{
			{Network: "net1", ContainerID: "keep", IfName: "eth0", IPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.10/24")}},
			{Network: "net1", ContainerID: "stale", IfName: "eth0", IPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.11/24"), netip.MustParsePrefix("fd01::11/64")}},
			{Network: "net1", ContainerID: "keep", IfName: "eth1", IPs: []netip.Prefix{netip.MustParsePrefix("10.1.0.12/24")}},
			{Network: "net2", ContainerID: "other", IfName: "eth0", IPs: []netip.Prefix{netip.MustParsePrefix("10.2.0.13/24")}},
		}
		w.do(t, func(ctx context.Context) error {
			for _, a := range atts {
				if err := Setup(ctx, a, opts); err != nil {
					return err
				}
			}
			return GC(ctx, "net1", valid(skel.Attachment{ContainerID: "keep", IfName: "eth0"}, skel.Attachment{ContainerID: "keep", IfName: "eth1"}))
		})
		rs := w.ruleset(t)
		assert.NotContains(t, rs, "10.1.0.11")
		assert.NotContains(t, rs, "fd01::11")
		for _, ip := range []string{"10.1.0.10", "10.1.0.12", "10.2.0.13"} {
			assert.Contains(t, rs, ip)
		}
		w.do(t, func(ctx context.Context) error {
			for _, a := range []Attachment{atts[0], atts[2], atts[3]} {
				assert.NoError(t, Check(ctx, a, opts), a.ContainerID)
			}
			return nil
		})
	})
}

func TestTeardownInAnUntouchedNamespaceCreatesNothing(t *testing.T) {
	w := newWorld(t)
	w.do(t, func(ctx context.Context) error {
		if err := Teardown(ctx, "net1", "c1", "eth0"); err != nil {
			return err
		}
		return GC(ctx, "net1", valid())
	})
	out, err := w.host.Exec(t, "nft", "list", "ruleset")
	require.NoError(t, err)
	assert.Empty(t, strings.TrimSpace(out))
}

func TestSetupTakesAnAddressOverFromAStaleAttachment(t *testing.T) {
	w := newWorld(t)
	opts := Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true}
	stale := w.att
	stale.ContainerID = "old"
	w.do(t, func(ctx context.Context) error {
		if err := Setup(ctx, stale, opts); err != nil {
			return err
		}
		if err := Setup(ctx, w.att, opts); err != nil {
			return err
		}
		return Check(ctx, w.att, opts)
	})
	assert.Equal(t, host4, w.peer(t, ext4))
}

func TestTeardownAndGCRemoveTheReferencePluginsNftablesRules(t *testing.T) {
	w := newWorld(t)
	referenceNFTables(t, w, [2]string{"c1", "10.1.0.5/24"}, [2]string{"c2", "10.1.0.6/24"}, [2]string{"c3", "10.1.0.7/24"})
	assert.Equal(t, host4, w.peer(t, ext4), "the reference rules work")
	w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
	rs := w.ruleset(t)
	assert.NotContains(t, rs, "10.1.0.5")
	assert.Contains(t, rs, "10.1.0.6")
	assert.Equal(t, ctr4.Addr(), w.peer(t, ext4))

	w.do(t, func(ctx context.Context) error {
		return GC(ctx, "net1", valid(skel.Attachment{ContainerID: "c3", IfName: "eth0"}))
	})
	rs = w.ruleset(t)
	assert.NotContains(t, rs, "10.1.0.6")
	assert.Contains(t, rs, "10.1.0.7")
}

func TestTeardownWithoutIptablesToolsSucceeds(t *testing.T) {
	w := newWorld(t)
	out, err := w.host.Exec(t, "nft", "add", "table", "ip", "nat") // a nat table made by nft itself
	require.NoError(t, err, out)
	t.Setenv("PATH", t.TempDir())
	w.do(t, func(ctx context.Context) error {
		assert.NoError(t, Teardown(ctx, "net1", "c1", "eth0"))
		assert.NoError(t, GC(ctx, "net1", valid()))
		return nil
	})
}

func TestRepeatedSetupWithOtherAddressesLeavesNothingAfterTeardown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, w *world, backend netfilter.Backend) {
		opts := dualStack(backend)
		moved := w.att
		moved.IPs = []netip.Prefix{netip.MustParsePrefix("10.1.0.9/24")}
		w.do(t, func(ctx context.Context) error {
			if err := Setup(ctx, w.att, opts); err != nil {
				return err
			}
			if err := Setup(ctx, moved, opts); err != nil {
				return err
			}
			return Check(ctx, moved, opts)
		})
		if backend == netfilter.NFTables {
			assert.NotContains(t, w.ruleset(t), "10.1.0.5", "the old address no longer masquerades")
		}
		w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
		rs := w.ruleset(t)
		assert.NotContains(t, rs, "10.1.0.5")
		assert.NotContains(t, rs, "10.1.0.9")
	})
}

func TestTeardownSurvivesAMapElementRemovedByHand(t *testing.T) {
	w := newWorld(t)
	w.do(t, func(ctx context.Context) error {
		return Setup(ctx, w.att, Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true})
	})
	out, err := w.host.Exec(t, "nft", "delete", "element", "inet", "cni_masquerade", "masq4", "{ 10.1.0.5 }")
	require.NoError(t, err, out)
	w.do(t, func(ctx context.Context) error { return Teardown(ctx, "net1", "c1", "eth0") })
	rs := w.ruleset(t)
	assert.NotContains(t, rs, "fd01::5")
	assert.NotContains(t, rs, nftChainName("net1", "c1", "eth0"))
}

// CHECK looks each address up in the verdict map by key: an element removed by hand is
// noticed even though the attachment's chain and every other element are intact.
func TestNFTablesCheckNoticesAMissingMapElement(t *testing.T) {
	w := newWorld(t)
	opts := Options{Backend: netfilter.NFTables, IPv4: true, IPv6: true}
	other := w.att
	other.ContainerID, other.IPs = "c2", []netip.Prefix{netip.MustParsePrefix("10.1.0.6/24")}
	w.do(t, func(ctx context.Context) error {
		if err := Setup(ctx, w.att, opts); err != nil {
			return err
		}
		if err := Setup(ctx, other, opts); err != nil {
			return err
		}
		return Check(ctx, w.att, opts)
	})
	out, err := w.host.Exec(t, "nft", "delete", "element", "inet", nftTableName, nftMap4, "{ 10.1.0.5 }")
	require.NoError(t, err, out)
	var checkErr, otherErr error
	w.do(t, func(ctx context.Context) error {
		checkErr, otherErr = Check(ctx, w.att, opts), Check(ctx, other, opts)
		return nil
	})
	require.Error(t, checkErr)
	assert.Contains(t, checkErr.Error(), "10.1.0.5 not in nftables map")
	assert.NoError(t, otherErr)
	w.do(t, func(ctx context.Context) error {
		if err := Teardown(ctx, "net1", "c1", "eth0"); err != nil {
			return err
		}
		return Teardown(ctx, "net1", "c2", "eth0")
	})
}

// valid is a GC request's list of attachments to keep, as plugins hand it to GC.
func valid(atts ...skel.Attachment) iter.Seq2[string, string] {
	return (&skel.Request{ValidAttachments: atts}).Valid()
}
