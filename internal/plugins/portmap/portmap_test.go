package portmap

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/skel"
)

var backends = []string{"nftables", "iptables"}

func standardMappings() []PortMapping {
	return []PortMapping{
		{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"},
		{HostPort: 8081, ContainerPort: udpPort, Protocol: "udp"},
	}
}

func TestMappedPortsAnswerFromOutsideLocalhostAndHairpin(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.container("ctr-a")
			conf := c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())
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
}

func TestAddWithoutMappingsTouchesNothing(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.container("ctr-a")
			before := e.ruleset()
			require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": backend}, nil)))
			assert.Equal(t, before, e.ruleset())
		})
	}
}

func TestDelWithoutRuntimeConfigRemovesEverything(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.container("ctr-a")
			other := e.container("ctr-b")
			otherConf := other.netconf(t, "net1", map[string]any{"backend": backend}, []PortMapping{{HostPort: 9090, ContainerPort: tcpPort, Protocol: "tcp"}})
			require.NoError(t, e.invoke(skel.CmdAdd, other, otherConf))
			require.NoError(t, e.invoke(skel.CmdAdd, c, c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())))
			_, err := dialUDP(e.client, "10.77.0.1:8081")
			require.NoError(t, err)
			require.NotEmpty(t, e.conntrackTo(c.ip4), "the UDP flow should be tracked")

			// Neither runtimeConfig nor prevResult, as after a lost cache.
			bare := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap"}`)
			require.NoError(t, e.invoke(skel.CmdDel, c, bare))
			rules := e.ruleset()
			o := owner{net: "net1", cid: "ctr-a"}
			assert.NotContains(t, rules, o.hash())
			assert.NotContains(t, rules, c.ip4)
			assert.NotContains(t, rules, c.ip6)
			assert.NotContains(t, rules, `"ctr-a"`)
			assert.Empty(t, e.conntrackTo(c.ip4))
			_, err = dialTCP(e.client, "10.77.0.1:8080")
			assert.Error(t, err, "the host port must be closed after DEL")

			require.NoError(t, e.invoke(skel.CmdDel, c, bare), "DEL twice")
			got, err := dialTCP(e.client, "10.77.0.1:9090")
			require.NoError(t, err)
			assert.Equal(t, "ctr-b", got, "the other attachment is untouched")
			require.NoError(t, e.invoke(skel.CmdCheck, other, otherConf))
		})
	}
}

func TestHostIPRestrictsTheMapping(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
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
}

func TestTwoContainersWithDifferentPorts(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a, b := e.container("ctr-a"), e.container("ctr-b")
			require.NoError(t, e.invoke(skel.CmdAdd, a, a.netconf(t, "net1", map[string]any{"backend": backend},
				[]PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})))
			require.NoError(t, e.invoke(skel.CmdAdd, b, b.netconf(t, "net1", map[string]any{"backend": backend},
				[]PortMapping{{HostPort: 8090, ContainerPort: tcpPort, Protocol: "tcp"}})))
			for port, want := range map[int]string{8080: "ctr-a", 8090: "ctr-b"} {
				got, err := dialTCP(e.client, fmt.Sprintf("10.77.0.1:%d", port))
				require.NoError(t, err)
				assert.Equal(t, want, got)
			}
		})
	}
}

func TestConditionsRestrictTheMapping(t *testing.T) {
	conds := map[string]map[string]any{
		"nftables": {"conditionsV4": []string{"ip saddr 10.99.0.0/16"}, "conditionsV6": []string{"ip6", "saddr", "fd77::2"}},
		"iptables": {"conditionsV4": []string{"-s", "10.99.0.0/16"}, "conditionsV6": []string{"-s", "fd77::2"}},
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
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
}

func TestGCRemovesOnlyInvalidAttachmentsOfTheNetwork(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a, b, other := e.container("ctr-a"), e.container("ctr-b"), e.container("ctr-c")
			bk := map[string]any{"backend": backend}
			confA := a.netconf(t, "net1", bk, []PortMapping{{HostPort: 8080, ContainerPort: tcpPort, Protocol: "tcp"}})
			confOther := other.netconf(t, "net2", bk, []PortMapping{{HostPort: 8092, ContainerPort: tcpPort, Protocol: "tcp"}})
			require.NoError(t, e.invoke(skel.CmdAdd, a, confA))
			require.NoError(t, e.invoke(skel.CmdAdd, b, b.netconf(t, "net1", bk, []PortMapping{{HostPort: 8091, ContainerPort: tcpPort, Protocol: "tcp"}})))
			require.NoError(t, e.invoke(skel.CmdAdd, other, confOther))

			gcConf := []byte(`{"cniVersion":"1.1.0","name":"net1","type":"portmap","cni.dev/valid-attachments":[{"containerID":"ctr-a","ifname":"eth0"}]}`)
			require.NoError(t, e.invoke(skel.CmdGC, a, gcConf))
			assert.NotContains(t, e.ruleset(), owner{net: "net1", cid: "ctr-b"}.hash())
			require.NoError(t, e.invoke(skel.CmdCheck, a, confA))
			require.NoError(t, e.invoke(skel.CmdCheck, other, confOther), "another network's attachment stays")
			_, err := dialTCP(e.client, "10.77.0.1:8091")
			assert.Error(t, err)
		})
	}
}

func TestCheckFailsAfterRuleRemovedByHand(t *testing.T) {
	o := owner{net: "net1", cid: "ctr-a"}
	removals := map[string][][]string{
		"nftables": {{"nft", "flush", "chain", "ip", "cni_portmap", "dn-" + o.hash()}},
		"iptables": {{"iptables", "-t", "nat", "-F", "CNI-DN-" + o.hash()}},
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.container("ctr-a")
			conf := c.netconf(t, "net1", map[string]any{"backend": backend}, standardMappings())
			require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
			require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
			for _, cmd := range removals[backend] {
				out, err := e.host.Exec(t, cmd[0], cmd[1:]...)
				require.NoError(t, err, out)
			}
			assert.Error(t, e.invoke(skel.CmdCheck, c, conf))
			// DEL still cleans up the damaged state, and a new ADD works.
			require.NoError(t, e.invoke(skel.CmdDel, c, conf))
			assert.NotContains(t, e.ruleset(), o.hash())
			require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
			require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
		})
	}
}

func TestCheckFailsAfterMapElementRemovedByHand(t *testing.T) {
	e := newEnv(t)
	c := e.container("ctr-a")
	conf := c.netconf(t, "net1", map[string]any{"backend": "nftables"}, standardMappings())
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf))
	out, err := e.host.Exec(t, "nft", "delete", "element", "ip", "cni_portmap", "ports", "{ tcp . 8080 }")
	require.NoError(t, err, out)
	assert.Error(t, e.invoke(skel.CmdCheck, c, conf))
	require.NoError(t, e.invoke(skel.CmdAdd, c, conf), "ADD repairs the attachment")
	require.NoError(t, e.invoke(skel.CmdCheck, c, conf))
	require.NoError(t, e.invoke(skel.CmdDel, c, conf))
	assert.NotContains(t, e.ruleset(), c.ip4)
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
		{"unsupported nft condition", `"backend":"nftables","conditionsV4":["tcp flags syn"]`, ok, "conditionsV4"},
		{"bad backend", `"backend":"pf"`, ok, "backend"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
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
