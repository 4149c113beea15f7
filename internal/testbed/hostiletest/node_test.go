package hostiletest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// node is one test's host: attachmenttest's namespaces (a master veth, host-local's
// data dir), a plugin dir of links to the cni binary, and the files flannel reads.
type node struct {
	*attachmenttest.Env
	dir                    string
	subnetFile, flannelDir string
	// last is the container attach made last.
	last *attachmenttest.Container
	// prev is the prevResult secondInterface made last.
	prev *result.Result
	// cacheDir is the CLI's result cache, when a test gives it one.
	cacheDir string
}

// pluginNames are the names the plugin dir links to the binary.
var pluginNames = []string{"bridge", "ptp", "macvlan", "ipvlan", "vlan", "dummy", "tap", "host-device",
	"flannel", "chain", "host-local", "sbr", "vrf", "bandwidth", "tuning", "portmap", "firewall"}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{Env: attachmenttest.New(t, nil), dir: testns.LinkPluginDir(t, pluginNames...),
		subnetFile: filepath.Join(t.TempDir(), "subnet.env"), flannelDir: filepath.Join(t.TempDir(), "flannel")}
	require.NoError(t, os.WriteFile(n.subnetFile,
		[]byte("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\n"), 0o644))
	return n
}

// hostLocal is an ipam section of the node's data dir on subnet.
func (n *node) hostLocal(subnet string) map[string]any {
	return map[string]any{"type": "host-local", "dataDir": n.DataDir, "ranges": []any{[]any{map[string]any{"subnet": subnet}}}}
}

// conf is the config of network "testnet" for plugin with keys; a nil value removes a
// key.
func (n *node) conf(plugin string, keys map[string]any) []byte {
	n.T.Helper()
	return n.ConfigOf(plugin, nil, keys)
}

// mainConf is a working config of each plugin that makes CNI_IFNAME: the main plugins,
// flannel (bridge and host-local as its delegate) and a chain holding bridge.
func (n *node) mainConf(plugin string) []byte {
	ipam := n.hostLocal(attachmenttest.Subnet)
	switch plugin {
	case "bridge":
		return n.conf(plugin, map[string]any{"bridge": "hbr0", "ipam": ipam})
	case "macvlan", "ipvlan":
		return n.conf(plugin, map[string]any{"master": attachmenttest.Master, "ipam": ipam})
	case "vlan":
		return n.conf(plugin, map[string]any{"master": attachmenttest.Master, "vlanId": 7, "ipam": ipam})
	case "flannel":
		return n.conf(plugin, map[string]any{"subnetFile": n.subnetFile, "dataDir": n.flannelDir,
			"ipam": map[string]any{"dataDir": n.DataDir}})
	case "chain":
		return n.conf(plugin, map[string]any{"plugins": []any{
			map[string]any{"type": "bridge", "bridge": "hbr0", "ipam": ipam},
			map[string]any{"type": "tuning"},
		}})
	}
	return n.conf(plugin, map[string]any{"ipam": ipam})
}

// exec runs plugin for cmd like a runtime; it returns stdout and the CNI error.
func (n *node) exec(plugin, cmd, cid, netns, ifName string, conf []byte) (string, *cnierror.Error) {
	n.T.Helper()
	o := plugintest.Exec(n.T, n.Host, plugintest.Call{Bin: filepath.Join(n.dir, plugin), Command: cmd,
		ContainerID: cid, Netns: netns, IfName: ifName, Config: conf})
	return o.Stdout, o.CNIError()
}

// hostLinks lists the host's links, without lo and the master.
func (n *node) hostLinks() []string {
	var out []string
	for _, l := range plugintest.Links(n.T, n.Host) {
		if l != "lo" && l != attachmenttest.Master {
			out = append(out, l)
		}
	}
	return out
}

// flannelStored lists the container ids flannel keeps a delegate config for; a dot
// file is one being written.
func (n *node) flannelStored() []string {
	return slices.DeleteFunc(plugintest.Entries(n.T, n.flannelDir), func(e string) bool { return strings.HasPrefix(e, ".") })
}

func describe(err *cnierror.Error) string {
	if err == nil {
		return "success"
	}
	return fmt.Sprintf("code %d: %s", err.Code, err.Msg)
}

// attach ADDs a new container to plugin with keys (and the node's host-local range) as
// eth0, fails the test if that fails, and keeps the container as n.last.
func (n *node) attach(plugin string, keys map[string]any) *result.Result {
	n.T.Helper()
	c := n.NewContainer()
	k := map[string]any{"ipam": n.hostLocal(attachmenttest.Subnet)}
	for key, v := range keys {
		k[key] = v
	}
	out, cerr := n.exec(plugin, skel.CmdAdd, c.ID, c.NS.Path, "eth0", n.conf(plugin, k))
	require.Nil(n.T, cerr, "%s ADD: %s", plugin, describe(cerr))
	res, err := result.Parse([]byte(out), "1.1.0")
	require.NoError(n.T, err)
	c.Res, n.last = res, c
	return res
}
