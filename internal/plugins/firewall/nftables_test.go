package firewall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/host/nftexpr"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var nftBackend = map[string]any{"backend": "nftables"}

var fwTable = &nftables.Table{Name: "cni_firewall", Family: nftables.TableFamilyINet}

func (c *ctr) ip6() string {
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			return ip.Address.Addr().String()
		}
	}
	return ""
}

// tag is the comment the nftables backend gives an attachment's rules.
func tag(network, id string) string { return fmt.Sprintf(`comment "net=%s id=%s"`, network, id) }

// elementLine matches the ruleset line of an attachment's address element.
func elementLine(addr string) *regexp.Regexp {
	return regexp.MustCompile(`element ` + regexp.QuoteMeta(addr) + ` comment "net=\S+ id=\S+"\n`)
}

// holder is the comment of an address's element: the attachment it belongs to.
func (e *env) holder(addr string) string {
	e.t.Helper()
	m := regexp.MustCompile(`element ` + regexp.QuoteMeta(addr) + ` comment "([^"]*)"`).FindStringSubmatch(e.ruleset())
	require.NotNil(e.t, m, "no element for %s", addr)
	return m[1]
}

func TestNFTablesAddInstallsTheAttachmentAsCommentedSetElements(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "nlay", bridge: "br-nlay", subnets: []string{"10.30.0.0/24", "fd30::/64"}, firewall: nftBackend})
	c := e.add(n, "c-nlay")
	rs := e.ruleset()
	assert.Contains(t, rs, "table inet cni_firewall\n")
	assert.Regexp(t, elementLine(c.ip4()), rs)
	assert.Regexp(t, elementLine(c.ip6()), rs)
	assert.Equal(t, 2, strings.Count(rs, tag("nlay", "c-nlay")), "an element per address: %s", rs)
	assert.Contains(t, rs, "\tjump CNI-ADMIN comment \"CNI firewall plugin admin overrides\"\n")
	e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c.att) })

	// A repeated ADD (with a policy now) changes nothing but the policy's elements.
	conf := fwConf(t, "nlay", map[string]any{"backend": "nftables", "ingressPolicy": "isolated"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c)
	require.NoError(t, err)
	withPolicy := e.ruleset()
	_, err = e.invoke(skel.CmdAdd, conf, c)
	require.NoError(t, err)
	assert.Equal(t, withPolicy, e.ruleset(), "a repeated ADD is a no-op")
	assert.Equal(t, 2, strings.Count(withPolicy, tag("nlay", "c-nlay")))
	for _, set := range []string{"policed", "same_bridge", "isolated"} {
		assert.Regexp(t, `set `+set+`\n\telement "br-nlay"`, withPolicy)
	}
	_, err = e.invoke(skel.CmdCheck, conf, c)
	require.NoError(t, err)
}

// The rules let the container's traffic through as the iptables backend's do: its own
// connections out and their replies; the outside cannot open one to it unless the
// policy is open. Here the host's drop policy is the operator's admin chain, whose
// verdict ends the packet's way through the forward hook before the lookups.
func TestNFTablesAttachmentReachesOutsideAndOperatorDropsWin(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "nout", bridge: "br-nout", subnets: []string{"10.31.0.0/24"}, firewall: nftBackend})
	c := e.add(n, "c-nout")
	got, err := reach(c.ns, extAddr)
	require.NoError(t, err)
	assert.Equal(t, "ext", got)

	// The operator drops TCP to ext in CNI-ADMIN: it wins over the plugin's accept, and
	// it survives ADD and DEL of other attachments.
	nfttest.Apply(t, e.host, func(conn *nftables.Conn) error {
		conn.AddRule(&nftables.Rule{Table: fwTable, Chain: &nftables.Chain{Name: "CNI-ADMIN", Table: fwTable},
			Exprs: nftexpr.Rule(nftexpr.NFProtoIs(false), nftexpr.DaddrIs(netip.MustParseAddr(extAddr)), nftexpr.L4ProtoIs(6), nftexpr.Drop())})
		return nil
	})
	_, err = dial(c.ns, extAddr)
	assert.Error(t, err, "the operator's admin rule must win over the plugin's accept")
	c2 := e.add(n, "c-nout-2")
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c2.att) })
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c.att) })
	assert.Regexp(t, `chain CNI-ADMIN\n\t.*`+regexp.QuoteMeta(extAddr)+`.* drop`, e.ruleset())
}

// Each admin chain a config names gets its jump, the first network's kept when a second
// one names another (Nomad's NOMAD-ADMIN beside CNI-ADMIN), also when their first ADDs
// race; DEL never flushes an admin chain.
func TestNFTablesKeepsEveryAdminChainsJumpUnderConcurrentAdds(t *testing.T) {
	e := newNFTEnv(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := fakePrev(fmt.Sprintf("10.32.0.%d/24", i+2))
			conf := fwConf(t, fmt.Sprintf("nadm%d", i), map[string]any{"backend": "nftables", "iptablesAdminChainName": fmt.Sprintf("ADMIN-%d", i)}, prev)
			_, errs[i] = e.invoke(skel.CmdAdd, conf, &ctr{ns: e.ext, id: fmt.Sprintf("c-adm-%d", i)})
		}()
	}
	wg.Wait()
	rs := e.ruleset()
	for i := range n {
		require.NoError(t, errs[i], "ADD %d", i)
		assert.Contains(t, rs, fmt.Sprintf("\tjump ADMIN-%d comment", i))
		assert.Contains(t, rs, fmt.Sprintf("chain ADMIN-%d\n", i))
		assert.Regexp(t, elementLine(fmt.Sprintf("10.32.0.%d", i+2)), rs)
	}
}

// fakePrev is a prevResult of one address on a bridge, for tests that call the plugin
// without making the interfaces.
func fakePrev(addr string) *result.Result {
	zero := 0
	return &result.Result{CNIVersion: "1.1.0",
		Interfaces: []result.Interface{{Name: "br-fake"}, {Name: "eth0", Sandbox: "/var/run/netns/x"}},
		IPs:        []result.IPConfig{{Address: netip.MustParsePrefix(addr), Interface: &zero}}}
}

func TestNFTablesDelWithoutPrevResultRemovesTheAttachmentOnly(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "ndel", bridge: "br-ndel", subnets: []string{"10.33.0.0/24", "fd33::/64"}, firewall: nftBackend})
	c1, c2 := e.add(n, "c-ndel-1"), e.add(n, "c-ndel-2")
	conf := fwConf(t, "ndel", nftBackend, nil)
	for range 2 {
		_, err := e.invoke(skel.CmdDel, conf, c1)
		require.NoError(t, err, "DEL (twice) needs no prevResult")
	}
	_, err := e.invoke(skel.CmdCheck, fwConf(t, "ndel", nftBackend, c1.res), c1)
	assert.Error(t, err, "CHECK after DEL")
	rs := e.ruleset()
	for _, gone := range []string{c1.ip4(), c1.ip6(), "c-ndel-1"} {
		assert.NotContains(t, rs, gone)
	}
	assert.Regexp(t, elementLine(c2.ip4()), rs)
	assert.Equal(t, 2, strings.Count(rs, tag("ndel", "c-ndel-2")), "another attachment's elements must stay")
	e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c2.att) })

	// A config that no longer validates still gets its attachment removed.
	bad := fwConf(t, "ndel", map[string]any{"backend": "nftables", "ingressPolicy": "closed"}, nil)
	_, err = e.invoke(skel.CmdDel, bad, c2)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(), "c-ndel-2")
}

// DEL cleans both rule backends whatever the config says now: a node that switched
// backend between ADD and DEL is left clean.
func TestNFTablesDelUnderAnotherBackendStillRemovesTheAttachment(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "nsw", bridge: "br-nsw", subnets: []string{"10.34.0.0/24"}, firewall: nftBackend})
	c := e.add(n, "c-nsw")
	_, err := e.invoke(skel.CmdDel, fwConf(t, "nsw", map[string]any{"backend": "firewalld"}, nil), c)
	require.NoError(t, err)
	assert.NotContains(t, e.ruleset(), c.ip4())
}

// An address can outlive its attachment's DEL (a runtime that lost it): the next
// attachment given the address takes it, and the stale attachment's DEL leaves it.
func TestNFTablesNewAttachmentTakesAnAddressFromAStaleOne(t *testing.T) {
	e := newNFTEnv(t)
	prev := fakePrev("10.35.0.2/24")
	stale, fresh := &ctr{ns: e.ext, id: "c-stale"}, &ctr{ns: e.ext, id: "c-fresh"}
	_, err := e.invoke(skel.CmdAdd, fwConf(t, "ntake", nftBackend, prev), stale)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdAdd, fwConf(t, "ntake", nftBackend, prev), fresh)
	require.NoError(t, err)
	assert.Equal(t, "net=ntake id=c-fresh", e.holder("10.35.0.2"))
	_, err = e.invoke(skel.CmdDel, fwConf(t, "ntake", nftBackend, nil), stale)
	require.NoError(t, err)
	assert.Equal(t, "net=ntake id=c-fresh", e.holder("10.35.0.2"), "the stale DEL must leave the new holder's element")
	_, err = e.invoke(skel.CmdCheck, fwConf(t, "ntake", nftBackend, prev), fresh)
	require.NoError(t, err)
}

// An ADD repeated with other addresses (no DEL between) adds them; DEL, which goes by
// the attachment's comment, removes the old and the new ones.
func TestNFTablesDelRemovesTheAddressesOfEveryADD(t *testing.T) {
	e := newNFTEnv(t)
	c := &ctr{ns: e.ext, id: "c-again"}
	_, err := e.invoke(skel.CmdAdd, fwConf(t, "nagain", nftBackend, fakePrev("10.36.0.2/24")), c)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdAdd, fwConf(t, "nagain", nftBackend, fakePrev("10.36.0.3/24")), c)
	require.NoError(t, err)
	assert.Regexp(t, elementLine("10.36.0.3"), e.ruleset())
	_, err = e.invoke(skel.CmdCheck, fwConf(t, "nagain", nftBackend, fakePrev("10.36.0.3/24")), c)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, fwConf(t, "nagain", nftBackend, fakePrev("10.36.0.3/24")), c)
	require.NoError(t, err)
	rs := e.ruleset()
	assert.NotContains(t, rs, "10.36.0.2")
	assert.NotContains(t, rs, "10.36.0.3")
}

func TestNFTablesCheckFailsWhenAPieceIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(e *env, c *ctr) func(*nftables.Conn) error
		msg    string
	}{
		{"address element", func(e *env, c *ctr) func(*nftables.Conn) error {
			return func(conn *nftables.Conn) error {
				return conn.SetDeleteElements(&nftables.Set{Table: fwTable, Name: "ctr4", KeyType: nftables.TypeIPAddr},
					[]nftables.SetElement{{Key: netip.MustParseAddr(c.ip4()).AsSlice()}})
			}
		}, "not in set ctr4"},
		{"accept rule", func(e *env, c *ctr) func(*nftables.Conn) error {
			return func(conn *nftables.Conn) error {
				ch := &nftables.Chain{Name: "forward", Table: fwTable}
				rules, err := conn.GetRules(fwTable, ch)
				if err != nil {
					return err
				}
				return conn.DelRule(rules[len(rules)-1])
			}
		}, "forward missing or incomplete"},
		{"admin jump", func(e *env, c *ctr) func(*nftables.Conn) error {
			return func(conn *nftables.Conn) error {
				ch := &nftables.Chain{Name: "forward", Table: fwTable}
				rules, err := conn.GetRules(fwTable, ch)
				if err != nil {
					return err
				}
				for _, r := range rules {
					if v, ok := r.Exprs[len(r.Exprs)-1].(*expr.Verdict); ok && v.Chain == "CNI-ADMIN" {
						return conn.DelRule(r)
					}
				}
				return fmt.Errorf("no admin jump")
			}
		}, "forward"},
		{"bridge policy", func(e *env, c *ctr) func(*nftables.Conn) error {
			return func(conn *nftables.Conn) error {
				return conn.SetDeleteElements(&nftables.Set{Table: fwTable, Name: "policed", KeyType: nftables.TypeIFName},
					[]nftables.SetElement{{Key: nftexpr.IfName("br-nchk")}})
			}
		}, "policed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newNFTEnv(t)
			fw := map[string]any{"backend": "nftables", "ingressPolicy": "same-bridge"}
			n := e.conflist(netOpts{name: "nchk", bridge: "br-nchk", subnets: []string{"10.37.0.0/24"}, firewall: fw})
			c := e.add(n, "c-nchk")
			e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c.att) })
			nfttest.Apply(t, e.host, tc.damage(e, c))
			err := e.host.Do(func() error { return e.runner.Check(context.Background(), n, c.att) })
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			// ADD repairs what CHECK found missing.
			_, err = e.invoke(skel.CmdAdd, fwConf(t, "nchk", fw, c.res), c)
			require.NoError(t, err)
			e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c.att) })
		})
	}
}

func TestNFTablesGCRemovesOnlyStaleAttachmentsOfTheNetwork(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "ngc", bridge: "br-ngc", subnets: []string{"10.38.0.0/24", "fd38::/64"}, firewall: nftBackend})
	other := e.conflist(netOpts{name: "ngc-other", bridge: "br-ngco", subnets: []string{"10.39.0.0/24"}, firewall: nftBackend})
	keep, stale, foreign := e.add(n, "c-keep"), e.add(n, "c-stale"), e.add(other, "c-foreign")
	e.host.Run(t, func() error {
		return e.runner.GC(context.Background(), n, &chain.GCArgs{ValidAttachments: []skel.Attachment{{ContainerID: keep.id, IfName: "eth0"}}})
	})
	rs := e.ruleset()
	assert.NotContains(t, rs, "c-stale")
	assert.NotContains(t, rs, stale.ip4())
	assert.Regexp(t, elementLine(keep.ip4()), rs)
	assert.Regexp(t, elementLine(foreign.ip4()), rs, "another network's attachment must stay")
	e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, keep.att) })
	_, err := e.invoke(skel.CmdCheck, fwConf(t, "ngc", nftBackend, stale.res), stale)
	assert.Error(t, err, "the collected attachment no longer checks")
}

// execFirewall runs the firewall binary as a runtime does, in the host namespace, with
// PATH set to path.
func (e *env) execFirewall(command string, c *ctr, conf map[string]any, path string) error {
	e.t.Helper()
	plugin := filepath.Join(testns.LinkPluginDir(e.t, "firewall"), "firewall")
	b, err := json.Marshal(conf)
	require.NoError(e.t, err)
	var stdout, stderr bytes.Buffer
	return e.host.Do(func() error {
		cmd := exec.Command(plugin)
		cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + c.id, "CNI_NETNS=" + c.ns.Path,
			"CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(plugin), "PATH=" + path}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(b), &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s %s", command, err, stdout.String(), stderr.String())
		}
		return nil
	})
}

// With backend unset, no firewalld and no iptables tools, the plugin uses nftables, also
// where tables of iptables-nft (a pod's own iptables) exist that nothing on the node can
// reach; ADD, CHECK and DEL all work without exec'ing anything. (That table's FORWARD
// drops by policy, which CHECK reports: a pod that cannot forward does not pass it.)
func TestExecUnsetBackendIsNFTablesWithoutIPTablesTools(t *testing.T) {
	e := newNFTEnv(t)
	nfttest.Apply(t, e.host, func(conn *nftables.Conn) error { // iptables-nft's `-P FORWARD DROP`
		tbl := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"})
		drop := nftables.ChainPolicyDrop
		conn.AddChain(&nftables.Chain{Table: tbl, Name: "FORWARD", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		return nil
	})
	n := e.conflist(netOpts{name: "nauto", bridge: "br-nauto", subnets: []string{"10.47.0.0/24"}})
	c := e.add(n, "c-nauto")
	noTools := t.TempDir()
	conf := fwConf(t, "nauto", map[string]any{"ingressPolicy": "same-bridge"}, c.res)
	require.NoError(t, e.execFirewall("ADD", c, conf, noTools))
	// That FORWARD chain drops the pod's traffic all the same, tools or not: CHECK says so.
	assert.ErrorContains(t, e.execFirewall("CHECK", c, conf, noTools), "chain FORWARD of table ip filter (hook forward) drops by policy")
	rs := e.ruleset()
	assert.Regexp(t, elementLine(c.ip4()), rs)
	assert.NotContains(t, rs, "CNI-FORWARD")
	require.NoError(t, e.execFirewall("DEL", c, fwConf(t, "nauto", nil, nil), noTools))
	assert.NotContains(t, e.ruleset(), c.ip4())
}

// With backend unset and the host's FORWARD rules in iptables, the plugin writes them
// there, where they count: an nftables accept could not override the host's DROP.
func TestExecUnsetBackendFollowsTheHostsIPTablesRules(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "nipt", bridge: "br-nipt", subnets: []string{"10.48.0.0/24"}})
	c := e.add(n, "c-nipt")
	require.NoError(t, e.execFirewall("ADD", c, fwConf(t, "nipt", nil, c.res), "/usr/sbin:/usr/bin:/sbin:/bin"))
	assert.Contains(t, e.save("iptables"), `id: \"c-nipt\"`)
	assert.NotContains(t, nfttest.Ruleset(t, e.host), "cni_firewall")
	got, err := reach(c.ns, extAddr)
	require.NoError(t, err)
	assert.Equal(t, "ext", got)
}

// Nomad writes `"backend": "iptables"` for every node: where the iptables tools are
// missing that means nftables, with Nomad's admin chain.
func TestExecIPTablesBackendWithoutTheToolsIsNFTables(t *testing.T) {
	e := newNFTEnv(t)
	n := e.conflist(netOpts{name: "nnomad", bridge: "br-nnomad", subnets: []string{"10.49.0.0/24"}})
	c := e.add(n, "c-nnomad")
	noTools := t.TempDir()
	conf := fwConf(t, "nnomad", map[string]any{"backend": "iptables", "iptablesAdminChainName": "NOMAD-ADMIN"}, c.res)
	for _, command := range []string{"ADD", "CHECK"} {
		require.NoError(t, e.execFirewall(command, c, conf, noTools))
	}
	rs := e.ruleset()
	assert.Regexp(t, elementLine(c.ip4()), rs)
	assert.Contains(t, rs, "\tjump NOMAD-ADMIN comment")
	require.NoError(t, e.execFirewall("DEL", c, conf, noTools))
	assert.NotContains(t, e.ruleset(), c.ip4())
}
