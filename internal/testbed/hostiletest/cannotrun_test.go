package hostiletest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	"github.com/cnikit/cni/internal/testbed/nfttest"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// cannotRunCase is a config naming a plugin that cannot run: ADD fails with code add,
// DEL and GC have nothing to undo.
type cannotRunCase struct {
	name, plugin string
	needs        []kernelfeature.Feature
	// conf is the config; working is one whose ADD and DEL run first, so that what
	// outlives every attachment (a bridge) is in the snapshot.
	conf, working func(n *node) []byte
	add           uint
	// says is what DEL writes on stderr about it.
	says string
}

// withIPAMType is the plugin's working config (mainConf, or host-device's) with
// ipam.type typ.
func withIPAMType(plugin, typ string) func(n *node) []byte {
	return func(n *node) []byte {
		var m map[string]any
		require.NoError(n.T, json.Unmarshal(workingConf(plugin)(n), &m))
		m["ipam"].(map[string]any)["type"] = typ
		b, err := json.Marshal(m)
		require.NoError(n.T, err)
		return b
	}
}

func workingConf(plugin string) func(n *node) []byte {
	return func(n *node) []byte {
		if plugin == "host-device" {
			return n.conf(plugin, map[string]any{"device": "hd0", "dataDir": n.hostDeviceDir(), "ipam": n.hostLocal(attachmenttest.Subnet)})
		}
		return n.mainConf(plugin)
	}
}

func cannotRunCases() []cannotRunCase {
	const released = "nothing to release, no ADD with this config can have run it"
	var out []cannotRunCase
	for plugin, needs := range map[string][]kernelfeature.Feature{
		"bridge": nil, "ptp": nil, "macvlan": {kernelfeature.Macvlan}, "ipvlan": {kernelfeature.IPVLAN},
		"vlan": {kernelfeature.VLAN}, "dummy": {kernelfeature.Dummy}, "tap": nil, "host-device": nil,
	} {
		out = append(out, cannotRunCase{name: plugin + ", ipam type not on CNI_PATH", plugin: plugin, needs: needs,
			conf: withIPAMType(plugin, "nope-ipam"), working: workingConf(plugin), add: cnierror.CodeInvalidConfig,
			says: "ipam nope-ipam: DEL: " + released})
	}
	return append(out,
		cannotRunCase{name: "chain, a child not on CNI_PATH", plugin: "chain",
			conf: func(n *node) []byte {
				return n.conf("chain", map[string]any{"plugins": []any{
					map[string]any{"type": "bridge", "bridge": "hbr0", "ipam": n.hostLocal(attachmenttest.Subnet)},
					map[string]any{"type": "nope"},
				}})
			},
			working: workingConf("chain"), add: cnierror.CodeInvalidConfig,
			says: `delete of plugin type="nope" in network "testnet": nothing to do, no ADD with this config can have run it`},
		cannotRunCase{name: "firewall at 0.3.1", plugin: "firewall",
			conf: func(n *node) []byte { return n.conf("firewall", map[string]any{"cniVersion": "0.3.1"}) },
			add:  cnierror.CodeIncompatibleVersion,
			says: "firewall: DEL: nothing to do, no ADD with this config can have run: incompatible CNI versions"},
	)
}

// TestDelAndGCOfAPluginThatCannotRunSucceed, exec'd: a config that names a plugin that
// cannot run (an IPAM type or a chain's child on no directory of CNI_PATH, a plugin
// that does not speak the config's cniVersion) can never have made an attachment. ADD
// fails with its code and leaves nothing; DEL, twice, and GC succeed, saying why on
// stderr, and leave the node as it was. Both failed for ever before.
func TestDelAndGCOfAPluginThatCannotRunSucceed(t *testing.T) {
	t.Parallel()
	for _, tc := range cannotRunCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requireFeatures(t, tc.needs)
			n := newNode(t)
			c := n.NewContainer()
			if tc.plugin == "host-device" {
				testns.Veth(t, n.Host, "hd0", nil, n.Peer, "hd0p", nil)
			}
			if tc.working != nil {
				n.mustExec(tc.plugin, skel.CmdAdd, c, "eth0", tc.working(n))
				n.mustExec(tc.plugin, skel.CmdDel, c, "eth0", tc.working(n))
			}
			before := n.snapshot(c)
			conf := tc.conf(n)
			call := plugintest.Call{Bin: filepath.Join(n.dir, tc.plugin), Command: skel.CmdAdd, ContainerID: c.ID,
				Netns: c.NS.Path, IfName: "eth0", Config: conf}
			err := plugintest.Exec(t, n.Host, call).CNIError()
			require.NotNil(t, err, "ADD")
			assert.Equal(t, tc.add, err.Code, "ADD: %s", describe(err))
			assert.Equal(t, before, n.snapshot(c), "after the failed ADD")
			for i := range 2 {
				call.Command = skel.CmdDel
				o := plugintest.Exec(t, n.Host, call)
				err = o.CNIError()
				assert.Nil(t, err, "DEL %d: %s", i+1, describe(err))
				assert.Contains(t, o.Stderr, tc.says, "DEL %d says why", i+1)
			}
			assert.Equal(t, before, n.snapshot(c), "after DEL")
			if v, _ := versionOf(conf); v == "1.1.0" {
				var gc map[string]any
				require.NoError(t, json.Unmarshal(conf, &gc))
				gc["cni.dev/valid-attachments"] = []any{}
				b, merr := json.Marshal(gc)
				require.NoError(t, merr)
				err = plugintest.Exec(t, n.Host, plugintest.Call{Bin: filepath.Join(n.dir, tc.plugin), Command: skel.CmdGC,
					Config: b}).CNIError()
				assert.Nil(t, err, "GC: %s", describe(err))
			}
		})
	}
}

func versionOf(conf []byte) (string, error) {
	var head struct {
		CNIVersion string `json:"cniVersion"`
	}
	err := json.Unmarshal(conf, &head)
	return head.CNIVersion, err
}

// TestDelOfAnIPAMDelegateThatRunsAndFailsStillFails: only "cannot run" is permanent. An
// IPAM delegate on CNI_PATH whose DEL fails (here with code 11) fails the main plugin's
// DEL, for the runtime to try again.
func TestDelOfAnIPAMDelegateThatRunsAndFailsStillFails(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	busy := "#!/bin/sh\ncat >/dev/null\necho '{\"cniVersion\":\"1.1.0\",\"code\":11,\"msg\":\"busy\"}'\nexit 1\n"
	require.NoError(t, os.WriteFile(filepath.Join(n.dir, "busy-ipam"), []byte(busy), 0o755))
	c := n.NewContainer()
	for _, plugin := range []string{"bridge", "ptp"} {
		_, err := n.exec(plugin, skel.CmdDel, c.ID, c.NS.Path, "eth0", withIPAMType(plugin, "busy-ipam")(n))
		require.NotNil(t, err, plugin)
		assert.Equal(t, cnierror.CodeTryAgainLater, err.Code, "%s: %s", plugin, describe(err))
	}
}

// TestLibcniDelOfAListWithAPluginBelowItsVersionCleansTheRest: the standard chain at
// 0.3.1 with firewall, which needs 0.4.0, through libcni: ADD fails at firewall (code
// 1) after bridge and portmap made their part. libcni's DEL runs the list backwards and
// stopped at firewall's refusal, for ever, so bridge's veth and address and portmap's
// rules stayed; firewall's DEL now succeeds and the rest is deleted.
func TestLibcniDelOfAListWithAPluginBelowItsVersionCleansTheRest(t *testing.T) {
	t.Parallel()
	n := newNode(t)
	c := n.NewContainer()
	n.mustExec("bridge", skel.CmdAdd, c, "eth0", n.mainConf("bridge"))
	n.mustExec("bridge", skel.CmdDel, c, "eth0", n.mainConf("bridge"))
	before := n.snapshot(c)
	list, err := json.Marshal(map[string]any{"cniVersion": "0.3.1", "name": "testnet", "plugins": []any{
		map[string]any{"type": "bridge", "bridge": "hbr0", "ipam": n.hostLocal(attachmenttest.Subnet)},
		map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		map[string]any{"type": "firewall"},
	}})
	require.NoError(t, err)
	conf, err := libcni.ConfListFromBytes(list)
	require.NoError(t, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.dir}, t.TempDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: c.ID, NetNS: c.NS.Path, IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": []any{map[string]any{"hostPort": 47100, "containerPort": 80, "protocol": "tcp"}}}}
	ctx := context.Background()
	var addErr error
	n.Host.Run(t, func() error { _, addErr = cni.AddNetworkList(ctx, conf, rt); return nil })
	require.Error(t, addErr)
	var te *types.Error
	require.ErrorAs(t, addErr, &te)
	assert.Equal(t, cnierror.CodeIncompatibleVersion, te.Code, "%v", addErr)
	assert.Contains(t, addErr.Error(), `plugin type="firewall"`)
	require.Contains(t, nfttest.Ruleset(t, n.Host), "47100", "premise: portmap mapped the port before firewall refused")
	for range 2 {
		n.Host.Run(t, func() error { return cni.DelNetworkList(ctx, conf, rt) })
	}
	assert.Equal(t, before, n.snapshot(c), "bridge's veth and address are gone")
	assert.NotContains(t, nfttest.Ruleset(t, n.Host), "47100", "portmap's mapping is gone")
}
