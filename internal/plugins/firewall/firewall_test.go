package firewall_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var iptablesBackend = map[string]any{"backend": "iptables"}

func TestForwardDropNeedsFirewallToReachOutside(t *testing.T) {
	e := newEnv(t)
	bare := e.add(e.conflist(netOpts{name: "bare", bridge: "br-bare", subnets: []string{"10.10.0.0/24"}}), "c-bare")
	_, err := dial(bare.ns, extAddr)
	require.Error(t, err, "without the firewall plugin the host's FORWARD DROP policy must block the container")

	fw := e.add(e.conflist(netOpts{name: "fw", bridge: "br-fw", subnets: []string{"10.11.0.0/24"}, firewall: iptablesBackend}), "c-fw")
	got, err := dial(fw.ns, extAddr)
	require.NoError(t, err)
	assert.Equal(t, "ext", got)

	// Only replies come back in: the outside cannot open connections to the container.
	_, err = dial(e.ext, fw.ip4())
	assert.Error(t, err, "new connections from outside must still be dropped")
}

func TestAddKeepsReferenceLayoutWithAttachmentComment(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "lay", bridge: "br-lay", subnets: []string{"10.12.0.0/24", "fd12::/64"}, firewall: iptablesBackend})
	c := e.add(n, "c-lay")
	var ip6 string
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			ip6 = ip.Address.Addr().String()
		}
	}
	comment := `--comment "name: \"lay\" id: \"c-lay\""`
	for _, tc := range []struct{ cmd, host string }{{"iptables", c.ip4() + "/32"}, {"ip6tables", ip6 + "/128"}} {
		save := e.save(tc.cmd)
		lines := ruleLines(save)
		require.NotEmpty(t, lines, tc.cmd)
		assert.Equal(t, `-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD`, lines[0], tc.cmd)
		assert.Contains(t, save, ":CNI-ADMIN - ", tc.cmd)
		assert.Contains(t, lines, `-A CNI-FORWARD -m comment --comment "CNI firewall plugin admin overrides" -j CNI-ADMIN`, tc.cmd)
		assert.Contains(t, lines, "-A CNI-FORWARD -d "+tc.host+" -m conntrack --ctstate RELATED,ESTABLISHED -m comment "+comment+" -j ACCEPT", tc.cmd)
		assert.Contains(t, lines, "-A CNI-FORWARD -s "+tc.host+" -m comment "+comment+" -j ACCEPT", tc.cmd)
		assert.Equal(t, "-A CNI-FORWARD -m comment --comment \"CNI firewall plugin admin overrides\" -j CNI-ADMIN",
			chainLines(save, "CNI-FORWARD")[0], "admin jump must stay first")
	}
	e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c.att) })

	before := e.save("iptables") + e.save("ip6tables")
	_, err := e.invoke(skel.CmdAdd, fwConf(t, "lay", map[string]any{"backend": "iptables", "ingressPolicy": "isolated"}, c.res), c)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdAdd, fwConf(t, "lay", map[string]any{"backend": "iptables", "ingressPolicy": "isolated"}, c.res), c)
	require.NoError(t, err)
	after := e.save("iptables") + e.save("ip6tables")
	assert.Equal(t, len(ruleLines(before))+2*6, len(ruleLines(after)),
		"a repeated ADD adds only the isolation rules (6 per family), once")
}

func TestDelWithoutPrevResultRemovesAttachmentRulesOfBothFamilies(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "del", bridge: "br-del", subnets: []string{"10.13.0.0/24", "fd13::/64"}, firewall: iptablesBackend})
	c1 := e.add(n, "c-del-1")
	c2 := e.add(n, "c-del-2")
	for _, cmd := range []string{"iptables", "ip6tables"} {
		require.Contains(t, e.save(cmd), `id: \"c-del-1\"`, cmd)
	}

	// A runtime that lost its cache (or a gone netns): DEL with no prevResult.
	conf := fwConf(t, "del", iptablesBackend, nil)
	_, err := e.invoke(skel.CmdDel, conf, c1)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, conf, c1)
	require.NoError(t, err, "DEL twice must succeed")
	_, err = e.invoke(skel.CmdCheck, fwConf(t, "del", iptablesBackend, c1.res), c1)
	assert.Error(t, err, "CHECK after DEL")
	for _, cmd := range []string{"iptables", "ip6tables"} {
		save := e.save(cmd)
		assert.NotContains(t, save, `id: \"c-del-1\"`, cmd)
		assert.Contains(t, save, `id: \"c-del-2\"`, "%s: another attachment's rules must stay", cmd)
		assert.Contains(t, save, "-A FORWARD -m comment --comment \"CNI firewall plugin rules\" -j CNI-FORWARD", cmd)
	}
	got, err := dial(c2.ns, extAddr)
	require.NoError(t, err)
	assert.Equal(t, "ext", got)
}

func TestDelThroughChainLeavesNoRuleOfTheAttachment(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "cdel", bridge: "br-cdel", subnets: []string{"10.14.0.0/24"}, firewall: iptablesBackend})
	c := e.add(n, "c-cdel")
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c.att) })
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c.att) })
	save := e.save("iptables")
	assert.NotContains(t, save, "c-cdel")
	assert.NotContains(t, save, c.ip4())
}

func TestAdminChainRulesSurviveAddAndDel(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"-N", "CNI-ADMIN"}, {"-A", "CNI-ADMIN", "-d", extAddr + "/32", "-p", "tcp", "-j", "DROP"}} {
		out, err := e.host.Exec(t, "iptables", append([]string{"-w"}, args...)...)
		require.NoError(t, err, out)
	}
	n := e.conflist(netOpts{name: "adm", bridge: "br-adm", subnets: []string{"10.15.0.0/24"}, firewall: iptablesBackend})
	c1 := e.add(n, "c-adm-1")
	adminRule := "-A CNI-ADMIN -d " + extAddr + "/32 -p tcp -j DROP"
	assert.Contains(t, ruleLines(e.save("iptables")), adminRule)
	_, err := dial(c1.ns, extAddr)
	assert.Error(t, err, "the operator's admin rule must win over the plugin's ACCEPT")

	c2 := e.add(n, "c-adm-2")
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c1.att) })
	e.host.Run(t, func() error { return e.runner.Del(context.Background(), n, c2.att) })
	assert.Contains(t, ruleLines(e.save("iptables")), adminRule)
}

func TestCheckFailsWhenARuleIsMissing(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "chk", bridge: "br-chk", subnets: []string{"10.16.0.0/24"}, firewall: iptablesBackend})
	c := e.add(n, "c-chk")
	e.host.Run(t, func() error { return e.runner.Check(context.Background(), n, c.att) })

	var victim string
	for _, l := range ruleLines(e.save("iptables")) {
		if strings.HasPrefix(l, "-A CNI-FORWARD -s ") {
			victim = l
		}
	}
	require.NotEmpty(t, victim)
	out, err := e.host.Exec(t, "sh", "-c", "iptables -w -D"+strings.TrimPrefix(victim, "-A"))
	require.NoError(t, err, out)
	err = e.host.Do(func() error { return e.runner.Check(context.Background(), n, c.att) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CNI-FORWARD lacks")
}

func TestGCRemovesOnlyStaleAttachmentsOfTheNetwork(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "gc", bridge: "br-gc", subnets: []string{"10.17.0.0/24", "fd17::/64"}, firewall: iptablesBackend})
	other := e.conflist(netOpts{name: "gc-other", bridge: "br-gco", subnets: []string{"10.18.0.0/24"}, firewall: iptablesBackend})
	keep := e.add(n, "c-keep")
	stale := e.add(n, "c-stale")
	foreign := e.add(other, "c-foreign")
	e.host.Run(t, func() error {
		return e.runner.GC(context.Background(), n, &chain.GCArgs{ValidAttachments: []skel.Attachment{{ContainerID: keep.id, IfName: "eth0"}}})
	})
	_, err := e.invoke(skel.CmdCheck, fwConf(t, "gc", iptablesBackend, keep.res), keep)
	assert.NoError(t, err, "the valid attachment's rules stay as ADD made them")
	_, err = e.invoke(skel.CmdCheck, fwConf(t, "gc", iptablesBackend, stale.res), stale)
	assert.Error(t, err, "the collected attachment no longer checks")
	for _, cmd := range []string{"iptables", "ip6tables"} {
		save := e.save(cmd)
		assert.NotContains(t, save, `id: \"c-stale\"`, cmd)
		assert.Contains(t, save, `id: \"c-keep\"`, cmd)
	}
	assert.Contains(t, e.save("iptables"), `id: \"c-foreign\"`, "another network's rules must stay")
	got, err := dial(foreign.ns, extAddr)
	require.NoError(t, err)
	assert.Equal(t, "ext", got)
}

// forEachBackend runs body once per rule backend, each in a world of its own: iptables
// with the host's FORWARD DROP policy (skipped where the firewall binaries are hidden),
// nftables without one.
func forEachBackend(t *testing.T, body func(t *testing.T, e *env, backend string)) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		e := newNFTEnv
		if backend == "iptables" {
			e = newEnv
		}
		body(t, e(t), backend)
	})
}

func TestSameBridgePolicyIsolatesBridges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		fw := map[string]any{"backend": backend, "ingressPolicy": "same-bridge"}
		a := e.conflist(netOpts{name: "iso-a", bridge: "br-a", subnets: []string{"10.20.0.0/24"}, firewall: fw})
		b := e.conflist(netOpts{name: "iso-b", bridge: "br-b", subnets: []string{"10.21.0.0/24"}, firewall: fw})
		open := e.conflist(netOpts{name: "iso-o", bridge: "br-o", subnets: []string{"10.42.0.0/24"}, firewall: map[string]any{"backend": backend}})
		a1, a2, b1, o1 := e.add(a, "c-a1"), e.add(a, "c-a2"), e.add(b, "c-b1"), e.add(open, "c-o1")

		got, err := reach(a1.ns, a2.ip4())
		require.NoError(t, err, "same bridge must stay reachable")
		assert.Equal(t, "c-a2", got)
		_, err = dial(a1.ns, b1.ip4())
		assert.Error(t, err, "another isolated bridge must not be reachable")
		_, err = dial(b1.ns, a1.ip4())
		assert.Error(t, err)
		for _, c := range []*ctr{a1, b1} {
			got, err = reach(c.ns, extAddr)
			require.NoError(t, err, "the outside must stay reachable")
			assert.Equal(t, "ext", got)
			got, err = reach(c.ns, o1.ip4())
			require.NoError(t, err, "a bridge with the open policy is not policed")
			assert.Equal(t, "c-o1", got)
		}
		if backend == "iptables" {
			lines := ruleLines(e.save("iptables"))
			assert.Equal(t, `-A FORWARD -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j CNI-ISOLATION-STAGE-1`, lines[0])
			assert.Equal(t, `-A FORWARD -m comment --comment "CNI firewall plugin rules" -j CNI-FORWARD`, lines[1])
			s1 := chainLines(e.save("iptables"), "CNI-ISOLATION-STAGE-1")
			assert.Equal(t, `-A CNI-ISOLATION-STAGE-1 -m comment --comment "CNI firewall plugin rules (ingressPolicy: same-bridge)" -j RETURN`, s1[len(s1)-1])
		}
		for _, c := range []*ctr{a1, a2, b1} {
			net := a
			if c == b1 {
				net = b
			}
			e.host.Run(t, func() error { return e.runner.Check(context.Background(), net, c.att) })
		}
		// DEL keeps the per-bridge rules: the bridge's other attachments rely on them.
		e.host.Run(t, func() error { return e.runner.Del(context.Background(), a, a1.att) })
		_, err = dial(b1.ns, a2.ip4())
		assert.Error(t, err)
	})
}

func TestOpenPolicyLetsBridgesTalk(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		fw := map[string]any{"backend": backend}
		a := e.conflist(netOpts{name: "open-a", bridge: "br-oa", subnets: []string{"10.22.0.0/24"}, firewall: fw})
		b := e.conflist(netOpts{name: "open-b", bridge: "br-ob", subnets: []string{"10.23.0.0/24"}, firewall: fw})
		a1, b1 := e.add(a, "c-oa"), e.add(b, "c-ob")
		got, err := reach(a1.ns, b1.ip4())
		require.NoError(t, err)
		assert.Equal(t, "c-ob", got)
	})
}

func TestIsolatedPolicyBlocksSameBridgeAndOtherBridges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		iso := map[string]any{"backend": backend, "ingressPolicy": "isolated"}
		a := e.conflist(netOpts{name: "isol-a", bridge: "br-ia", subnets: []string{"10.24.0.0/24"}, firewall: iso})
		b := e.conflist(netOpts{name: "isol-b", bridge: "br-ib", subnets: []string{"10.25.0.0/24"}, firewall: iso})
		a1, a2, b1 := e.add(a, "c-ia1"), e.add(a, "c-ia2"), e.add(b, "c-ib1")

		_, err := dial(a1.ns, a2.ip4())
		assert.Error(t, err, "containers on one isolated bridge must not reach each other")
		_, err = dial(a1.ns, b1.ip4())
		assert.Error(t, err, "nor containers on another bridge")
		got, err := reach(a1.ns, extAddr)
		require.NoError(t, err, "the outside must stay reachable")
		assert.Equal(t, "ext", got)
		e.host.Run(t, func() error { return e.runner.Check(context.Background(), a, a1.att) })

		// DEL keeps the per-bridge rules: other attachments of the bridge rely on them.
		e.host.Run(t, func() error { return e.runner.Del(context.Background(), a, a1.att) })
		if backend == "iptables" {
			assert.Contains(t, e.save("iptables"), "-A CNI-ISOLATION-STAGE-1 -i br-ia -o br-ia")
		} else {
			assert.Contains(t, e.ruleset(), "set isolated\n\telement \"br-ia\" . \"br-ia\"\n")
		}
	})
}

func TestInvalidConfigsAreRefusedWithCodes(t *testing.T) {
	e := newNFTEnv(t)
	c := &ctr{ns: e.ext, id: "c-bad"}
	n := e.conflist(netOpts{name: "bad", bridge: "br-bad", subnets: []string{"10.26.0.0/24"}})
	good := e.add(n, "c-good")
	before := e.ruleset()
	for _, tc := range []struct {
		name    string
		keys    map[string]any
		noPrev  bool
		version string
		code    uint
		msg     string
	}{
		{name: "unknown backend", keys: map[string]any{"backend": "ebtables"}, code: cnierror.CodeInvalidConfig, msg: "backend"},
		{name: "unknown ingress policy", keys: map[string]any{"backend": "iptables", "ingressPolicy": "closed"}, code: cnierror.CodeInvalidConfig, msg: "ingressPolicy"},
		{name: "admin chain too long", keys: map[string]any{"backend": "iptables", "iptablesAdminChainName": strings.Repeat("A", 29)}, code: cnierror.CodeInvalidConfig, msg: "iptablesAdminChainName"},
		{name: "admin chain is a built-in", keys: map[string]any{"backend": "iptables", "iptablesAdminChainName": "FORWARD"}, code: cnierror.CodeInvalidConfig, msg: "iptablesAdminChainName"},
		{name: "admin chain is the plugin's", keys: map[string]any{"backend": "iptables", "iptablesAdminChainName": "CNI-FORWARD"}, code: cnierror.CodeInvalidConfig, msg: "iptablesAdminChainName"},
		{name: "admin chain with a blank", keys: map[string]any{"backend": "iptables", "iptablesAdminChainName": "MY ADMIN"}, code: cnierror.CodeInvalidConfig, msg: "iptablesAdminChainName"},
		{name: "backend of the wrong type", keys: map[string]any{"backend": 4}, code: cnierror.CodeInvalidConfig, msg: "firewall"},
		{name: "not chained", keys: iptablesBackend, noPrev: true, code: cnierror.CodeInvalidConfig, msg: "prevResult"},
		{name: "version before 0.4.0", keys: iptablesBackend, version: "0.3.1", code: cnierror.CodeIncompatibleVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := good.res
			if tc.noPrev {
				prev = nil
			}
			conf := fwConf(t, "bad", tc.keys, prev)
			if tc.version != "" {
				conf["cniVersion"] = tc.version
				delete(conf, "prevResult")
			}
			_, err := e.invoke(skel.CmdAdd, conf, c)
			require.Error(t, err)
			assert.Equal(t, tc.code, cnierror.Code(err), err.Error())
			assert.Contains(t, err.Error(), tc.msg)
			assert.Equal(t, before, e.ruleset(), "no table, chain or rule left")
		})
	}
	assert.NotContains(t, e.ruleset(), "c-bad", "a refused ADD must change nothing")
}

// A prevResult that lists no host interface (an IPAM result handed on, Cilium's) does
// not stop the same-bridge policy: the kernel shows the bridge the container's veth is
// a port of, or the host end of a routed veth. The reference refuses a result without interfaces, and with only the
// container's interface listed polices that interface's name ("eth0") on the host.
func TestSameBridgePolicyFindsTheBridgeThatPrevResultDoesNotList(t *testing.T) {
	e := newEnv(t)
	n := e.conflist(netOpts{name: "nobr", bridge: "br-nobr", subnets: []string{"10.27.0.0/24"}})
	c := e.add(n, "c-nobr")
	policy := map[string]any{"backend": "iptables", "ingressPolicy": "same-bridge"}
	prev := c.res.Clone()
	prev.Interfaces = nil
	for i := range prev.IPs {
		prev.IPs[i].Interface = nil
	}
	_, err := e.invoke(skel.CmdAdd, fwConf(t, "nobr", policy, prev), c)
	require.NoError(t, err)
	assert.Contains(t, e.save("iptables"), "-A CNI-ISOLATION-STAGE-1 -i br-nobr ! -o br-nobr ")
	_, err = e.invoke(skel.CmdCheck, fwConf(t, "nobr", policy, prev), c)
	require.NoError(t, err)

	// A routed veth (Calico's, Cilium's) is policed by its host end, as the reference
	// polices a listed host veth.
	routed := &ctr{ns: testns.NewWithLoopback(t), id: "c-routed"}
	testns.Veth(t, e.host, "vrouted", nil, routed.ns, "eth0", nil)
	_, err = e.invoke(skel.CmdAdd, fwConf(t, "nobr", policy, prev), routed)
	require.NoError(t, err)
	assert.Contains(t, e.save("iptables"), "-A CNI-ISOLATION-STAGE-1 -i vrouted ! -o vrouted ")

	// Without a host side in prevResult or in the kernel there is nothing to police.
	lone := &ctr{ns: testns.NewWithLoopback(t), id: "c-lone"}
	_, err = e.invoke(skel.CmdAdd, fwConf(t, "nobr", policy, prev), lone)
	require.Error(t, err)
	assert.Equal(t, uint(cnierror.CodeInvalidConfig), cnierror.Code(err))
	assert.ErrorContains(t, err, `ingressPolicy: "same-bridge" needs the host interface (the bridge): prevResult.interfaces lists none`)
	assert.NotContains(t, e.save("iptables"), "c-lone")
}

// ruleLines are the -A lines of an iptables-save output.
func ruleLines(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	return out
}

// chainLines are the -A lines of one chain.
func chainLines(save, chain string) []string {
	var out []string
	for _, l := range ruleLines(save) {
		if strings.HasPrefix(l, "-A "+chain+" ") {
			out = append(out, l)
		}
	}
	return out
}

// Where bridged frames skip iptables, "isolated" could not drop same-bridge traffic: ADD
// says so instead of pretending (the reference installs the rule and isolates nothing).
// Both rule backends see bridged frames only through br_netfilter.
func TestIsolatedPolicyIsRefusedWhenBridgedTrafficSkipsIPTables(t *testing.T) {
	e := newNFTEnv(t)
	e.host.Run(t, func() error { return sysctl.Set("net/bridge/bridge-nf-call-iptables", "0") })
	a := e.conflist(netOpts{name: "isol-off", bridge: "br-io", subnets: []string{"10.26.0.0/24"}})
	c := e.add(a, "c-io")
	before := e.ruleset()
	for _, backend := range []string{"iptables", "nftables"} {
		iso := map[string]any{"backend": backend, "ingressPolicy": "isolated"}
		_, err := e.invoke(skel.CmdAdd, fwConf(t, "isol-off", iso, c.res), c)
		require.Error(t, err, backend)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), backend)
		assert.Contains(t, err.Error(), "bridge-nf-call-iptables", backend)
		assert.Contains(t, err.Error(), "ingressPolicy", "%s: the error names the field", backend)
		assert.Equal(t, before, e.ruleset(), "%s: no table, chain or rule left", backend)
	}
	assert.NotContains(t, e.ruleset(), c.ip4())
}
