package inproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// recorder is a third-party plugin (it shares none of our code), exec'd from the path.
var recorder = testns.NewHelper("../../internal/chain/testdata/recorder")

// TestMain removes the recorder once every test of the process is done with it.
func TestMain(m *testing.M) { recorder.Main(m) }

// stdPlugins are the plugin types of the standard chain.
var stdPlugins = []string{"loopback", "bridge", "host-local", "portmap", "bandwidth"}

// standardChain is deploy/net.d/10-std.conflist's chain (with loopback first, as a
// runtime that does not bring lo up itself lists it), its IPAM state under ipamDir.
func standardChain(ipamDir string, extra ...string) string {
	plugins := append([]string{
		`{"type":"loopback"}`,
		`{"type":"bridge","bridge":"cni-emb0","isGateway":true,"ipMasq":true,` +
			`"ipam":{"type":"host-local","dataDir":"` + ipamDir + `","ranges":[[{"subnet":"10.78.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`,
		`{"type":"portmap","capabilities":{"portMappings":true}}`,
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}`,
	}, extra...)
	return `{"cniVersion":"1.1.0","name":"emb","plugins":[` + strings.Join(plugins, ",") + `]}`
}

var standardCaps = map[string]any{
	"portMappings": []any{map[string]any{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}},
	"bandwidth":    map[string]any{"ingressRate": 10000000, "ingressBurst": 1000000, "egressRate": 10000000, "egressBurst": 1000000},
}

// volatile hides what differs on every ADD whoever runs it: MACs, veth names.
var volatile = regexp.MustCompile(`([0-9a-f]{2}:){5}[0-9a-f]{2}|veth[0-9a-f]{8}|bwp[0-9a-f]{12}`)

// client is libcni as a runtime holds it: one config list, a plugin path, a cache dir
// and an invoke.Exec (nil: libcni's own, which execs every plugin).
type client struct {
	t    testing.TB
	host *testns.NS
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

func newClient(t testing.TB, host *testns.NS, exec invoke.Exec, pluginDir, cacheDir, conf string) *client {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(t, err)
	return &client{t: t, host: host, cni: libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, cacheDir, exec), list: list}
}

// in runs op inside the host namespace.
func (c *client) in(op func(ctx context.Context) error) error {
	var err error
	c.host.Run(c.t, func() error { err = op(context.Background()); return nil })
	return err
}

func (c *client) add(rt *libcni.RuntimeConf) (string, error) {
	var out string
	err := c.in(func(ctx context.Context) error {
		res, err := c.cni.AddNetworkList(ctx, c.list, rt)
		if err != nil {
			return err
		}
		b, err := json.Marshal(res)
		out = string(b)
		return err
	})
	return out, err
}

func (c *client) check(rt *libcni.RuntimeConf) error {
	return c.in(func(ctx context.Context) error { return c.cni.CheckNetworkList(ctx, c.list, rt) })
}

func (c *client) del(rt *libcni.RuntimeConf) error {
	return c.in(func(ctx context.Context) error { return c.cni.DelNetworkList(ctx, c.list, rt) })
}

// cached is the result libcni reads back from its cache for rt, as JSON.
func (c *client) cached(rt *libcni.RuntimeConf) string {
	res, err := c.cni.GetNetworkListCachedResult(c.list, rt)
	require.NoError(c.t, err)
	require.NotNil(c.t, res, "no cached result for %s", rt.ContainerID)
	b, err := json.Marshal(res)
	require.NoError(c.t, err)
	return string(b)
}

// pluginDir is a plugin dir holding links to the cni binary under names (libcni's own
// Exec execs them) and the third-party recorder.
func pluginDir(t testing.TB, names ...string) string {
	t.Helper()
	rec, err := recorder.Path()
	require.NoError(t, err)
	dir := testns.LinkPluginDir(t, names...)
	require.NoError(t, os.Symlink(rec, filepath.Join(dir, "recorder")))
	return dir
}

// runtimeConf is the attachment of container id in ctr, with the standard chain's
// capability args.
func runtimeConf(id string, ctr *testns.NS) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: ctr.Path, IfName: "eth0", CapabilityArgs: standardCaps}
}

// attachment is rt for inproc.Runner.
func attachment(rt *libcni.RuntimeConf) inproc.Attachment {
	return inproc.Attachment{ContainerID: rt.ContainerID, Netns: rt.NetNS, IfName: rt.IfName, CapabilityArgs: rt.CapabilityArgs}
}

// entries lists dir's files (none when it does not exist).
func entries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func recorderConf(file string) string {
	return fmt.Sprintf(`{"type":"recorder","recordFile":%q}`, file)
}
