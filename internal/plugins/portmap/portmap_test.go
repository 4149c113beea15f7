package portmap

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

var backends = []string{"nftables", "iptables"}

// forEachBackend runs body as a parallel subtest per rule backend, each with an env of
// its own (skipped where the backend cannot run).
func forEachBackend(t *testing.T, body func(t *testing.T, e *env, backend string)) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		t.Parallel()
		body(t, newEnv(t), backend)
	})
}

func standardMappings() []PortMapping {
	return []PortMapping{
		{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
		{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"},
	}
}

func TestMappedPortsAnswerFromOutsideLocalhostAndHairpin(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": backend}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))

		cases := []struct {
			name string
			from func() (string, error)
		}{
			{"external tcp v4", func() (string, error) { return dialTCP(e.client, "10.77.0.1:8080") }},
			{"external udp v4", func() (string, error) { return dialUDP(e.client, "10.77.0.1:8081") }},
			{"external tcp v6", func() (string, error) { return dialTCP(e.client, "[fd77::1]:8080") }},
			{"external udp v6", func() (string, error) { return dialUDP(e.client, "[fd77::1]:8081") }},
			{"localhost tcp", func() (string, error) { return dialTCP(e.host, "127.0.0.1:8080") }},
			{"localhost udp", func() (string, error) { return dialUDP(e.host, "127.0.0.1:8081") }},
			{"hairpin tcp", func() (string, error) { return dialTCP(c.ns, c.host+":8080") }},
			{"hairpin udp", func() (string, error) { return dialUDP(c.ns, c.host+":8081") }},
		}
		for _, tc := range cases {
			got, err := tc.from()
			if assert.NoError(t, err, tc.name) {
				assert.Equal(t, "ctr-a", got, tc.name)
			}
		}
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

func TestAddWithoutMappingsTouchesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		before := e.ruleset()
		require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": backend}, nil)))
		assert.Equal(t, before, e.ruleset())
	})
}

func TestDelWithoutRuntimeConfigRemovesEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		other := e.container("ctr-b")
		otherConf := other.netconf(t, "net1", map[string]any{"backend": backend}, []PortMapping{{HostPort: 9090, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, other, otherConf))
		conf := c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		_, err := dialUDP(e.client, "10.77.0.1:8081")
		require.NoError(t, err)
		require.NotEmpty(t, e.conntrackTo(c.ip4), "the UDP flow should be tracked")

		// Neither runtimeConfig nor prevResult, as after a lost cache.
		bare := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)
		require.NoError(t, e.invoke(skel.CmdDel, c, bare))
		rules := e.ruleset()
		o := attachment{net: "net1", cid: "ctr-a"}
		assert.NotContains(t, rules, o.hash())
		assert.NotContains(t, rules, c.ip4)
		assert.NotContains(t, rules, c.ip6)
		assert.NotContains(t, rules, `"ctr-a"`)
		assert.Empty(t, e.conntrackTo(c.ip4))
		_, err = dialTCP(e.client, "10.77.0.1:8080")
		assert.Error(t, err, "the host port must be closed after DEL")
		assert.Error(t, e.invoke(skel.CmdCheck, c, conf), "CHECK after DEL")

		require.NoError(t, e.invoke(skel.CmdDel, c, bare), "DEL twice")
		got, err := dialTCP(e.client, "10.77.0.1:9090")
		require.NoError(t, err)
		assert.Equal(t, "ctr-b", got, "the other attachment is untouched")
		require.NoError(t, e.invoke(skel.CmdCheck, other, otherConf))
	})
}

func TestHostIPRestrictsTheMapping(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		mappings := []PortMapping{
			{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "10.77.0.1"},
			{HostPort: 8082, ContainerPort: tcpPort, Protocol: "tcp", HostIP: "fd77::1"},
		}
		conf := c.netconf(t, "net1", map[string]any{"backend": backend}, mappings)
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		got, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err)
		assert.Equal(t, "ctr-a", got)
		_, err = dialTCP(e.host, c.host+":8080")
		assert.Error(t, err, "another host address must not be mapped")
		_, err = dialTCP(e.client, "[fd77::1]:8080")
		assert.Error(t, err, "a v4 hostIP does not map v6")
		got, err = dialTCP(e.client, "[fd77::1]:8082")
		require.NoError(t, err)
		assert.Equal(t, "ctr-a", got)
		_, err = dialTCP(e.client, "10.77.0.1:8082")
		assert.Error(t, err, "a v6 hostIP does not map v4")
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

func TestTwoContainersWithDifferentPorts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		a, confA := e.mapped(t, "ctr-a", map[string]any{"backend": backend}, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
		b, confB := e.mapped(t, "ctr-b", map[string]any{"backend": backend}, []PortMapping{{HostPort: 8090, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
		require.NoError(t, e.invoke(skel.CmdAdd, b, confB))
		for port, want := range map[int]string{8080: "ctr-a", 8090: "ctr-b"} {
			got, err := dialTCP(e.client, fmt.Sprintf("10.77.0.1:%d", port))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		// Each CHECK finds its own attachment's rules beside the other's.
		require.NoError(t, e.invoke(skel.CmdCheck, a, confA))
		require.NoError(t, e.invoke(skel.CmdCheck, b, confB))
	})
}

func TestConditionsRestrictTheMapping(t *testing.T) {
	conds := map[string]map[string]any{
		"nftables": {"conditionsV4": []string{"ip saddr 10.99.0.0/16"}, "conditionsV6": []string{"ip6", "saddr", "fd77::2"}},
		"iptables": {"conditionsV4": []string{"-s", "10.99.0.0/16"}, "conditionsV6": []string{"-s", "fd77::2"}},
	}
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		extra := conds[backend]
		extra["backend"] = backend
		conf := c.netconf(t, "net1", extra, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		_, err := dialTCP(e.client, "10.77.0.1:8080")
		assert.Error(t, err, "v4 clients outside 10.99.0.0/16 are not forwarded")
		got, err := dialTCP(e.client, "[fd77::1]:8080")
		require.NoError(t, err, "the v6 condition admits the client")
		assert.Equal(t, "ctr-a", got)
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

func TestGCRemovesOnlyInvalidAttachmentsOfTheNetwork(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		a, b, other := e.container("ctr-a"), e.container("ctr-b"), e.container("ctr-c")
		bk := map[string]any{"backend": backend}
		confA := a.netconf(t, "net1", bk, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
		confOther := other.netconf(t, "net2", bk, []PortMapping{{HostPort: 8092, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
		confB := b.netconf(t, "net1", bk, []PortMapping{{HostPort: 8091, ContainerPort: tcpPort, Protocol: "tcp"}})
		require.NoError(t, e.invoke(skel.CmdAdd, b, confB))
		require.NoError(t, e.invoke(skel.CmdAdd, other, confOther))

		gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap","cni.dev/valid-attachments":[{"containerID":"ctr-a","ifname":"eth0"}]}`)
		require.NoError(t, e.invoke(skel.CmdGC, a, gcConf))
		assert.NotContains(t, e.ruleset(), attachment{net: "net1", cid: "ctr-b"}.hash())
		require.NoError(t, e.invoke(skel.CmdCheck, a, confA))
		require.NoError(t, e.invoke(skel.CmdCheck, other, confOther), "another network's attachment stays")
		_, err := dialTCP(e.client, "10.77.0.1:8091")
		assert.Error(t, err)
		assert.Error(t, e.invoke(skel.CmdCheck, b, confB), "the collected attachment no longer checks")
		got, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err, "the valid attachment's port still answers")
		assert.Equal(t, "ctr-a", got)
	})
}

func TestCheckFailsAfterRuleRemovedByHand(t *testing.T) {
	o := attachment{net: "net1", cid: "ctr-a"}
	removals := map[string]func(e *env){
		"nftables": func(e *env) { // nft flush chain ip cni_portmap dn-<hash>
			nfttest.Apply(e.t, e.host, func(c *nftables.Conn) error {
				c.FlushChain(newNFTFamily(false).chain(nftDNPrefix + o.hash()))
				return nil
			})
		},
		"iptables": func(e *env) {
			out, err := e.host.Exec(e.t, "iptables", "-t", "nat", "-F", "CNI-DN-"+o.hash())
			require.NoError(e.t, err, out)
		},
	}
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": backend}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
		removals[backend](e)
		assert.Error(t, e.invoke(skel.CmdCheck, c, conf))
		// DEL still cleans up the damaged state, and a new ADD works.
		require.NoError(t, e.invoke(skel.CmdDel, c, conf))
		assert.NotContains(t, e.ruleset(), o.hash())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

func TestCheckFailsAfterMapElementRemovedByHand(t *testing.T) {
	e := newEnv(t)
	c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": "nftables"}, standardMappings())
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
	e.deletePortsElement(8080)
	assert.Error(t, e.invoke(skel.CmdCheck, c, conf))
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf), "ADD repairs the attachment")
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	require.NoError(t, e.invoke(skel.CmdDel, c, conf))
	assert.NotContains(t, e.ruleset(), c.ip4)
}

// withoutAddresses is conf with a prevResult that lists the container interface but no
// address on it, as a main plugin that leaves addressing to another hands it on.
func withoutAddresses(t *testing.T, conf []byte, c *container) []byte {
	return pt.WithKeys(t, conf, map[string]any{"prevResult": map[string]any{"cniVersion": "1.1.0",
		"interfaces": []map[string]any{{"name": "eth0", "sandbox": c.ns.Path}}}})
}

// A prevResult that gives the container interface no address is mapped to the
// addresses the kernel has on the interface, and they answer; the reference maps
// nothing and says nothing. With no address there either there is nothing to map to:
// ADD passes prevResult on, as the reference does, and says why on stderr.
func TestAddWithoutAddressesInPrevResultMapsTheKernelsOnes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		conf := withoutAddresses(t, c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings()), c)
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		for _, addr := range []string{"10.77.0.1:8080", "[fd77::1]:8080"} {
			got, err := dialTCP(e.client, addr)
			require.NoError(t, err, addr)
			assert.Equal(t, "ctr-a", got, addr)
		}
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
		require.NoError(t, e.invoke(skel.CmdDel, c, conf))

		bare := &container{ns: testns.NewWithLoopback(t), id: "ctr-bare"}
		testns.Veth(t, e.host, "vbare", nil, bare.ns, "eth0", nil)
		before := e.ruleset()
		conf = withoutAddresses(t, bare.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings()), bare)
		var stderr bytes.Buffer
		args := skel.Args{Command: skel.CmdAdd, ContainerID: bare.id, Netns: bare.ns.Path, IfName: "eth0", Path: []string{"/nonexistent"}}
		var res *result.Result
		require.NoError(t, e.host.Do(func() error {
			var err error
			res, err = skel.Invoke(context.Background(), Plugin(), args, conf, &stderr)
			return err
		}))
		assert.Equal(t, []result.Interface{{Name: "eth0", Sandbox: bare.ns.Path}}, res.Interfaces, "prevResult is passed on")
		assert.Contains(t, stderr.String(), `portmap: no address of interface "eth0" to map ports to`)
		assert.Equal(t, before, e.ruleset())
	})
}

func TestAddRequiresPrevResult(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-a")
	conf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":80,"protocol":"tcp"}]}}`)
	err := e.invoke(skel.CmdAdd, c, conf)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Contains(t, err.Error(), "prevResult")
}

// A refused ADD, run through skel as a runtime's, makes no table, chain or rule: the
// ruleset of a host that had none stays empty.
func TestRefusedAddNamesTheFieldAndLeavesTheRulesetAsItWas(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c := e.container("ctr-a")
		bk := map[string]any{"backend": backend}
		cases := map[string]struct {
			conf  []byte
			field string
		}{
			"host port zero": {c.netconf(t, "net1", bk, []PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: "tcp"}}), "portMappings[0].hostPort"},
			"bad protocol":   {c.netconf(t, "net1", bk, []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "icmp"}}), "portMappings[0].protocol"},
			"second mapping's host ip": {c.netconf(t, "net1", bk, []PortMapping{standardMappings()[0],
				{HostPort: 81, ContainerPort: 80, Protocol: "tcp", HostIP: "1.2.3"}}), "portMappings[1].hostIP"},
			"no prevResult":          {pt.WithKeys(t, c.netconf(t, "net1", bk, standardMappings()), map[string]any{"prevResult": nil}), "prevResult"},
			"mark bit with nftables": {c.netconf(t, "net1", map[string]any{"backend": "nftables", "markMasqBit": 3}, standardMappings()), "markMasqBit"},
		}
		if backend == "iptables" {
			cases["nft conditions with iptables"] = struct {
				conf  []byte
				field string
			}{c.netconf(t, "net1", map[string]any{"backend": "iptables", "conditionsV6": []string{"ip6 saddr ::1"}}, standardMappings()), "conditionsV6"}
		}
		before := e.ruleset()
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				pt.RequireRefused(t, e.invoke(skel.CmdAdd, c, tc.conf), cnierror.CodeInvalidConfig, tc.field)
				assert.Equal(t, before, e.ruleset(), "no table, chain or rule left")
			})
		}
	})
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	ok := []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "tcp"}}
	cases := []struct {
		name     string
		extra    string
		mappings []PortMapping
		field    string
	}{
		{"host port zero", ``, []PortMapping{{HostPort: 0, ContainerPort: 80, Protocol: "tcp"}}, "portMappings[0].hostPort"},
		{"host port too big", ``, []PortMapping{{HostPort: 70000, ContainerPort: 80, Protocol: "tcp"}}, "portMappings[0].hostPort"},
		{"container port zero", ``, []PortMapping{{HostPort: 80, ContainerPort: 0, Protocol: "tcp"}}, "portMappings[0].containerPort"},
		{"bad protocol", ``, []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "icmp"}}, "portMappings[0].protocol"},
		{"bad host ip", ``, []PortMapping{{HostPort: 80, ContainerPort: 80, Protocol: "tcp", HostIP: "1.2.3"}}, "portMappings[0].hostIP"},
		{"mark bit too big", `"backend":"iptables","markMasqBit":32`, ok, "markMasqBit"},
		{"mark bit negative", `"backend":"iptables","markMasqBit":-1`, ok, "markMasqBit"},
		{"mark bit and external chain", `"markMasqBit":3,"externalSetMarkChain":"KUBE-MARK-MASQ"`, ok, "markMasqBit"},
		{"mark bit with nftables", `"backend":"nftables","markMasqBit":3`, ok, "markMasqBit"},
		{"external chain with nftables", `"backend":"nftables","externalSetMarkChain":"X"`, ok, "externalSetMarkChain"},
		{"iptables conditions with nftables", `"backend":"nftables","conditionsV4":["-s","1.2.3.4"]`, ok, "conditionsV4"},
		{"nft conditions with iptables", `"backend":"iptables","conditionsV6":["ip6 saddr ::1"]`, ok, "conditionsV6"},
		{"nft condition ending its rule", `"backend":"nftables","conditionsV4":["tcp flags syn;","flush ruleset"]`, ok, "conditionsV4[0]"},
		{"bad backend", `"backend":"pf"`, ok, "backend"},
		// Found by FuzzLoad: a newline ends the iptables-restore line (issue 13).
		{"external chain with a newline", `"externalSetMarkChain":"RELX\n-F"`, ok, "externalSetMarkChain"},
		{"condition with a newline", `"conditionsV4":["-s","1.2.3.4\nCOMMIT\n*filter\n-F"]`, ok, "conditionsV4[1]"},
		{"nft condition with a control character", `"conditionsV6":["ip6 saddr ::1\u0000"]`, ok, "conditionsV6[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.extra, `"backend":"iptables","conditionsV6"`) {
				// Without the tools backend iptables is nftables, which reads these.
				testns.RequireFirewallBinaries(t, "the iptables backend's refusal of nft syntax")
			}
			mappings := `[]`
			if tc.mappings != nil {
				mappings = fmt.Sprintf(`[{"hostPort":%d,"containerPort":%d,"protocol":%q,"hostIP":%q}]`,
					tc.mappings[0].HostPort, tc.mappings[0].ContainerPort, tc.mappings[0].Protocol, tc.mappings[0].HostIP)
			}
			extra := tc.extra
			if extra != "" {
				extra += ","
			}
			req := &skel.Request{Config: []byte(`{` + extra + `"runtimeConfig":{"portMappings":` + mappings + `}}`)}
			_, err := load(req)
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.True(t, strings.Contains(err.Error(), tc.field), "%q should name %s", err.Error(), tc.field)
		})
	}
}

func TestIPTablesLayoutMatchesTheReference(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the iptables backend's own test")
	e := newEnv(t)
	c := e.container("ctr-a")
	many := []PortMapping{{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"}}
	for p := 9000; p < 9016; p++ {
		many = append(many, PortMapping{HostPort: p, ContainerPort: tcpPort, Protocol: "tcp"})
	}
	require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": "iptables", "markMasqBit": 5}, many)))
	out, err := e.host.Exec(t, "iptables-save", "-t", "nat")
	require.NoError(t, err, out)
	dn := "CNI-DN-" + attachment{net: "net1", cid: "ctr-a"}.hash()
	comment := `-m comment --comment "dnat name: \"net1\" id: \"ctr-a\""`
	for _, line := range []string{
		"-A PREROUTING -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		"-A OUTPUT -m addrtype --dst-type LOCAL -j CNI-HOSTPORT-DNAT",
		`-A POSTROUTING -m comment --comment "CNI portfwd requiring masquerade" -j CNI-HOSTPORT-MASQ`,
		"-A CNI-HOSTPORT-MASQ -m mark --mark 0x20/0x20 -j MASQUERADE",
		`-A CNI-HOSTPORT-SETMARK -m comment --comment "CNI portfwd masquerade mark" -j MARK --set-xmark 0x20/0x20`,
		"-A CNI-HOSTPORT-DNAT -p tcp " + comment + " -m multiport --dports 9000,9001,9002,9003,9004,9005,9006,9007,9008,9009,9010,9011,9012,9013,9014 -j " + dn,
		"-A CNI-HOSTPORT-DNAT -p tcp " + comment + " -m multiport --dports 9015 -j " + dn,
		"-A CNI-HOSTPORT-DNAT -p udp " + comment + " -m multiport --dports 8081 -j " + dn,
		"-A " + dn + " -s 10.1.1.0/24 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
		"-A " + dn + " -s 127.0.0.1/32 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK",
		"-A " + dn + " -p udp -m udp --dport 8081 -j DNAT --to-destination 10.1.1.2:8001",
	} {
		assert.Contains(t, out, line+"\n")
	}
	out6, err := e.host.Exec(t, "ip6tables-save", "-t", "nat")
	require.NoError(t, err, out6)
	assert.Contains(t, out6, "-A "+dn+" -s fd01::/64 -p udp -m udp --dport 8081 -j CNI-HOSTPORT-SETMARK\n")
	assert.Contains(t, out6, "-A "+dn+" -p udp -m udp --dport 8081 -j DNAT --to-destination [fd01::2]:8001\n")
	assert.NotContains(t, out6, "127.0.0.1")
}

func TestIPTablesExternalMarkChainAndMasqAll(t *testing.T) {
	testns.RequireFirewallBinaries(t, "the iptables backend's own test")
	e := newEnv(t)
	c := e.container("ctr-a")
	for _, tool := range []string{"iptables", "ip6tables"} {
		out, err := e.host.Exec(t, tool, "-t", "nat", "-N", "KUBE-MARK-MASQ")
		require.NoError(t, err, out)
	}
	conf := c.netconf(t, "net1", map[string]any{"backend": "iptables", "externalSetMarkChain": "KUBE-MARK-MASQ", "masqAll": true},
		[]PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
	out, err := e.host.Exec(t, "iptables-save", "-t", "nat")
	require.NoError(t, err, out)
	dn := "CNI-DN-" + attachment{net: "net1", cid: "ctr-a"}.hash()
	assert.Contains(t, out, "-A "+dn+" -p tcp -m tcp --dport 8080 -j KUBE-MARK-MASQ\n")
	assert.NotContains(t, out, "CNI-HOSTPORT-SETMARK")
	assert.NotContains(t, out, "CNI-HOSTPORT-MASQ")
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
}

func TestSNATOffInstallsNoMasquerade(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": backend, "snat": false}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		rules := e.ruleset()
		assert.NotContains(t, rules, "masquerade")
		assert.NotContains(t, rules, "MASQUERADE")
		got, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err)
		assert.Equal(t, "ctr-a", got)
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	})
}

func TestMasqAllMasqueradesExternalClients(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env, backend string) {
		c, conf := e.mapped(t, "ctr-a", map[string]any{"backend": backend, "masqAll": true}, standardMappings())
		require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
		_, err := dialTCP(e.client, "10.77.0.1:8080")
		require.NoError(t, err)
		// The container sees the host, not the client, as the peer.
		flows := e.conntrackTo(c.ip4)
		require.NotEmpty(t, flows)
		for _, f := range flows {
			assert.Contains(t, f, "dst="+c.host, "reply goes to the masquerading host: %s", f)
		}
		require.NoError(t, e.invoke(skel.CmdCheck, c, conf), "CHECK knows masqAll's rules")
	})
}

// TestBackendFollowsTheReferenceKeys: backend, and unset the options only one backend
// has, choose as the reference does (the conditions' syntax:
// TestConditionsInIPTablesSyntaxPickIPTables); where the iptables tools are missing,
// backend iptables is nftables and iptables-only options are refused.
func TestBackendFollowsTheReferenceKeys(t *testing.T) {
	parse := func(t *testing.T, keys string) (*settings, error) {
		var conf Config
		require.NoError(t, json.Unmarshal([]byte(keys), &conf))
		return parseSettings(&conf)
	}
	t.Run("tools installed", func(t *testing.T) {
		testns.FakeIPTablesTools(t)
		for keys, want := range map[string]netfilter.Backend{
			`{"backend":"nftables"}`:                              netfilter.NFTables,
			`{"backend":"iptables"}`:                              netfilter.IPTables,
			`{"backend":"auto","markMasqBit":5}`:                  netfilter.IPTables,
			`{"externalSetMarkChain":"KUBE-MARK-MASQ"}`:           netfilter.IPTables,
			`{"backend":"auto","conditionsV6":["ip6 saddr ::1"]}`: netfilter.NFTables,
		} {
			s, err := parse(t, keys)
			require.NoError(t, err, keys)
			assert.Equal(t, want, s.backend, keys)
		}
	})
	t.Run("no tools", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		s, err := parse(t, `{"backend":"iptables"}`)
		require.NoError(t, err)
		assert.Equal(t, netfilter.NFTables, s.backend)
		_, err = parse(t, `{"conditionsV4":["!","-d","127.0.0.0/8"]}`)
		require.Error(t, err)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
		assert.Contains(t, err.Error(), "conditionsV4")
	})
}
