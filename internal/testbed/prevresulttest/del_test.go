package prevresulttest_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/plugins/attachment/attachmenttest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// minimalKeys are, per plugin of the registry, the keys its config cannot do without
// (DIR stands for a directory of the test's own, for every key that names state).
var minimalKeys = map[string]string{
	"host-local":  `"ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"static":      `"ipam":{"type":"static","addresses":[{"address":"10.98.0.5/24"}]}`,
	"dhcp":        `"ipam":{"type":"dhcp","daemonSocketPath":"DIR/dhcp.sock"}`,
	"loopback":    ``,
	"bandwidth":   ``,
	"bridge":      `"bridge":"cni-del0","ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"ptp":         `"ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"portmap":     ``,
	"tuning":      `"dataDir":"DIR/tuning"`,
	"firewall":    `"backend":"iptables"`,
	"sbr":         ``,
	"vrf":         `"vrfname":"blue"`,
	"flannel":     `"subnetFile":"DIR/subnet.env","dataDir":"DIR/flannel"`,
	"macvlan":     `"master":"none0","ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"ipvlan":      `"master":"none0","ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"vlan":        `"master":"none0","vlanId":10,"ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"dummy":       `"ipam":{"type":"host-local","subnet":"10.98.0.0/24","dataDir":"DIR/ipam"}`,
	"host-device": `"device":"none0","dataDir":"DIR/host-device"`,
	"tap":         ``,
	"chain":       `"plugins":[{"type":"loopback"},{"type":"portmap"}]`,
}

// pluginNames lists the registry as the binary does (cni --list).
func pluginNames(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(testns.Binary(t), "--list").Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// DEL with no prevResult, or an empty one, succeeds for every plugin, with the netns
// there or not named at all: DEL is best effort and needs only the network name,
// container id and interface (upstream row C11, the spec's DEL wording).
func TestDelWithoutPrevResultSucceedsForEveryPlugin(t *testing.T) {
	testns.RequireRoot(t)
	names := pluginNames(t)
	dir := testns.LinkPluginDir(t, names...)
	for _, name := range names {
		keys, ok := minimalKeys[name]
		require.True(t, ok, "no minimal config for %s: add one", name)
		for prevName, prev := range map[string]string{"no prevResult": "", "empty prevResult": `,"prevResult":{"cniVersion":"1.1.0"}`} {
			for _, withNetns := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/netns %v", name, prevName, withNetns), func(t *testing.T) {
					host, netns := testns.NewWithLoopback(t), ""
					if withNetns {
						netns = testns.NewWithLoopback(t).Path
					}
					state := t.TempDir()
					conf := `{"cniVersion":"1.1.0","name":"delnet","type":"` + name + `"`
					if keys != "" {
						conf += "," + strings.ReplaceAll(keys, "DIR", state)
					}
					conf += prev + "}"
					e := &attachmenttest.Env{T: t, Plugin: &skel.Plugin{Name: name}, Host: host}
					out, cerr := e.Exec(dir, "DEL", "ctr-del", netns, []byte(conf), "PATH="+os.Getenv("PATH"))
					assert.Nil(t, cerr, "stdout %s", out)
				})
			}
		}
	}
}
