package ptp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execPlugin runs the ptp binary (a link named ptp to the cni binary) inside the host
// namespace, as a runtime would, and returns stdout.
func (e *env) execPlugin(t testing.TB, bin, cmd, cid string, config []byte, path string) ([]byte, error) {
	t.Helper()
	o := pt.Exec(t, e.host, pt.Call{Bin: bin, Command: cmd, ContainerID: cid, Netns: e.cont.Path, IfName: "eth0",
		Path: "/nonexistent", Config: config, Env: []string{"PATH=" + path}})
	return []byte(o.Stdout), o.Err
}

const sysPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func TestExecAddCheckDelThroughTheBinary(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t)
		bin := testns.LinkPlugin(t, "ptp")
		conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqBackend": backend})

		out, err := e.execPlugin(t, bin, "ADD", "c1", conf, sysPath)
		require.NoError(t, err, string(out))
		res, err := result.Parse(out, "1.1.0")
		require.NoError(t, err)
		require.Len(t, res.IPs, 2)
		rs := e.ruleset(t)
		assert.Contains(t, rs, "10.10.0.2")
		if backend == "iptables" {
			assert.Contains(t, rs, "-A POSTROUTING -s 10.10.0.2/32")
		}

		out, err = e.execPlugin(t, bin, "CHECK", "c1", pt.WithPrev(t, conf, res), sysPath)
		require.NoError(t, err, string(out))
		for i := 0; i < 2; i++ {
			out, err = e.execPlugin(t, bin, "DEL", "c1", conf, sysPath)
			require.NoError(t, err, string(out))
		}
		rs = e.ruleset(t)
		assert.NotContains(t, rs, "CNI-")
		assert.NotContains(t, rs, "10.10.0.2")
		assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
		assert.Equal(t, []string{"lo"}, e.links(t, e.host))
		assert.Empty(t, e.reservations(t))
	})
}

func TestExecAddFailingAtMasqueradeLeavesNothing(t *testing.T) {
	testns.RequireFirewallBinaries(t, "fails the masquerade with iptables tools of the test's that fail")
	e := newEnv(t)
	bin := testns.LinkPlugin(t, "ptp")
	conf := e.config(t, map[string]any{"ipMasq": true, "ipMasqBackend": "iptables"})
	// iptables tools that fail: the masquerade step fails after IPAM and veth.
	tools := t.TempDir()
	for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		require.NoError(t, os.WriteFile(filepath.Join(tools, tool), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	}
	out, err := e.execPlugin(t, bin, "ADD", "c1", conf, tools+":"+sysPath)
	require.Error(t, err)
	assert.True(t, strings.Contains(string(out), "ipMasq"), string(out))
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
	assert.Equal(t, []string{"lo"}, e.links(t, e.host))
	assert.Empty(t, e.reservations(t))
}

// BenchmarkExecAddDel measures one exec'd ADD plus DEL of a dual-stack ptp attachment
// with nftables masquerade, the binary cost a runtime pays per pod.
func BenchmarkExecAddDel(b *testing.B) {
	e := newEnv(b)
	bin := testns.LinkPlugin(b, "ptp")
	for _, backend := range []string{"nftables", "iptables"} {
		b.Run(backend, func(b *testing.B) {
			conf := benchConfig(b, e, backend)
			for b.Loop() {
				if out, err := e.execPlugin(b, bin, "ADD", "c1", conf, sysPath); err != nil {
					b.Fatalf("ADD: %v: %s", err, out)
				}
				if out, err := e.execPlugin(b, bin, "DEL", "c1", conf, sysPath); err != nil {
					b.Fatalf("DEL: %v: %s", err, out)
				}
			}
		})
	}
}

func benchConfig(b *testing.B, e *env, backend string) []byte {
	return []byte(`{"cniVersion":"1.1.0","name":"ptpnet","type":"ptp","ipMasq":true,"ipMasqBackend":"` + backend +
		`","ipam":{"type":"host-local","dataDir":"` + e.dataDir + `","ranges":[[{"subnet":"10.10.0.0/24"}],[{"subnet":"fd10::/64"}]]}}`)
}

// TestExecDelIgnoresSettingsItDoesNotNeed: a DEL whose config ADD would refuse (a bad
// MTU, unreadable masquerade keys) still removes the veth, the addresses and the
// masquerade an earlier ADD made.
func TestExecDelIgnoresSettingsItDoesNotNeed(t *testing.T) {
	for _, backend := range []string{"iptables", "nftables"} {
		for name, keys := range map[string]map[string]any{
			"mtu ADD refuses":       {"mtu": 5},
			"unreadable ipMasq":     {"ipMasq": "yes"},
			"unreadable ipMasqIPv4": {"ipMasqIPv4": 1},
		} {
			t.Run(backend+"/"+name, func(t *testing.T) {
				requireBackend(t, backend)
				delIgnoresSettings(t, backend, keys)
			})
		}
	}
}

func delIgnoresSettings(t *testing.T, backend string, keys map[string]any) {
	e := newEnv(t)
	bin := testns.LinkPlugin(t, "ptp")
	good := map[string]any{"ipMasq": true, "ipMasqBackend": backend}
	out, err := e.execPlugin(t, bin, "ADD", "c1", e.config(t, good), sysPath)
	require.NoError(t, err, string(out))
	require.Contains(t, e.ruleset(t), "10.10.0.2", "premise: masqueraded")

	for k, v := range keys {
		good[k] = v
	}
	bad := e.config(t, good)
	out, err = e.execPlugin(t, bin, "DEL", "c1", bad, sysPath)
	require.NoError(t, err, string(out))
	assert.NotContains(t, e.ruleset(t), "10.10.0.2")
	assert.Empty(t, e.reservations(t))
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont))
	assert.Equal(t, []string{"lo"}, e.links(t, e.host))
}

func TestExecDelWithoutIPAMTypeSucceeds(t *testing.T) {
	e := newEnv(t)
	bin := testns.LinkPlugin(t, "ptp")
	conf := []byte(`{"cniVersion":"1.1.0","name":"ptpnet","type":"ptp"}`)
	out, err := e.execPlugin(t, bin, "ADD", "c1", conf, sysPath)
	require.Error(t, err, "premise: ADD needs an IPAM type")
	assert.Contains(t, string(out), "ipam")
	assert.Equal(t, []string{"lo"}, e.links(t, e.cont), "the refused ADD made no veth")
	assert.Equal(t, []string{"lo"}, e.links(t, e.host))
	out, err = e.execPlugin(t, bin, "DEL", "c1", conf, sysPath)
	require.NoError(t, err, string(out))
}
