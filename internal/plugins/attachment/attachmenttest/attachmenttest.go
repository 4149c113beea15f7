// Package attachmenttest is the test bench the one-link plugins (macvlan, ipvlan, vlan,
// dummy) share: a throwaway "host" namespace holding a master interface whose other end
// sits in a "peer" namespace (the rest of the network), a host-local data dir, and
// helpers to run a plugin in-process, exec'd like a runtime, and to see what it left.
package attachmenttest

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// Names of the master pair.
const (
	Master = "master0" // the master, in Env.Host
	Peer   = "peer0"   // its other end, in Env.Peer
)

// Subnet is the default host-local range of Config; Env.Peer's end of the master holds
// PeerAddr in it, containers get addresses from .10 on.
const (
	Subnet   = "10.90.0.0/24"
	PeerAddr = "10.90.0.1"
)

// Env is one test's host namespace with a master, the peer namespace at the master's
// other end, and a host-local data dir.
type Env struct {
	T       testing.TB
	Plugin  *skel.Plugin
	Host    *testns.NS
	Peer    *testns.NS
	DataDir string
}

// New makes an Env for plugin (nil when the test execs plugins by name only, ExecCall): the master (a veth end, up, no address) in the host
// and its peer end, up with PeerAddr, in the peer namespace.
func New(t testing.TB, plugin *skel.Plugin) *Env {
	t.Helper()
	testns.RequireRoot(t)
	e := &Env{T: t, Plugin: plugin, Host: testns.NewWithLoopback(t), Peer: testns.NewWithLoopback(t), DataDir: t.TempDir()}
	testns.Veth(t, e.Host, Master, nil, e.Peer, Peer, []string{PeerAddr + "/24"})
	return e
}

// HostLocal is an ipam section of the Env's data dir, one range set per subnet, each
// handing out addresses from .10 on.
func (e *Env) HostLocal(subnets ...string) map[string]any {
	var ranges []any
	for _, s := range subnets {
		r := map[string]any{"subnet": s}
		if strings.HasSuffix(s, ".0/24") {
			r["rangeStart"] = strings.TrimSuffix(s, "0/24") + "10"
		}
		ranges = append(ranges, []any{r})
	}
	return map[string]any{"type": "host-local", "dataDir": e.DataDir, "ranges": ranges}
}

// Config builds the plugin's config: network "testnet", host-local on Subnet, plus
// keys; a nil value removes a key.
func (e *Env) Config(keys map[string]any) []byte {
	e.T.Helper()
	return e.ConfigOf(e.Plugin.Name, map[string]any{"ipam": e.HostLocal(Subnet)}, keys)
}

// ConfigOf builds a config of network "testnet" for plugin: base, then keys over it; a
// nil value removes a key.
func (e *Env) ConfigOf(plugin string, base, keys map[string]any) []byte {
	e.T.Helper()
	return plugintest.Config(e.T, map[string]any{"cniVersion": "1.1.0", "name": "testnet", "type": plugin}, base, keys)
}

// Invoke runs the plugin in-process inside the host namespace, as interface eth0.
func (e *Env) Invoke(cmd, cid, netns string, conf []byte, cniArgs ...string) (*result.Result, error) {
	return plugintest.Invoke(e.T, e.Host, e.Plugin, plugintest.Call{Command: cmd, ContainerID: cid, Netns: netns,
		IfName: "eth0", Args: strings.Join(cniArgs, ";"), Config: conf})
}

// Container is one attached container namespace.
type Container struct {
	NS  *testns.NS
	ID  string
	Res *result.Result
}

var containerSeq atomic.Int64

// NewContainer makes a container namespace (lo up) that is not attached yet.
func (e *Env) NewContainer() *Container {
	return &Container{NS: testns.NewWithLoopback(e.T), ID: fmt.Sprintf("ctr-%d", containerSeq.Add(1))}
}

// Add attaches a new container with conf and fails the test if ADD fails.
func (e *Env) Add(conf []byte, cniArgs ...string) *Container {
	e.T.Helper()
	c := e.NewContainer()
	e.AddTo(c, conf, cniArgs...)
	return c
}

// AddTo runs ADD for c and fails the test if it fails.
func (e *Env) AddTo(c *Container, conf []byte, cniArgs ...string) {
	e.T.Helper()
	res, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, conf, cniArgs...)
	require.NoError(e.T, err)
	c.Res = res
}

// Del runs DEL for c.
func (e *Env) Del(c *Container, conf []byte) error {
	_, err := e.Invoke(skel.CmdDel, c.ID, c.NS.Path, conf)
	return err
}

// Check runs CHECK for c with its ADD result as prevResult.
func (e *Env) Check(c *Container, conf []byte) error {
	_, err := e.Invoke(skel.CmdCheck, c.ID, c.NS.Path, plugintest.WithPrev(e.T, conf, c.Res))
	return err
}

// Reservations lists host-local's reservations for network testnet.
func (e *Env) Reservations() []string {
	return plugintest.Reservations(e.T, filepath.Join(e.DataDir, "testnet"))
}

// AssertNothingLeft checks that c holds only lo, the host only lo and the master, and
// host-local no reservation: what every DEL and every failed ADD must leave.
func (e *Env) AssertNothingLeft(t testing.TB, c *Container) {
	t.Helper()
	assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
	assert.Equal(t, []string{"lo", Master}, plugintest.Links(t, e.Host))
	assert.Empty(t, e.Reservations())
}

// Addr returns the address of the container's first IP, without prefix length.
func (c *Container) Addr(t testing.TB) string {
	t.Helper()
	require.NotEmpty(t, c.Res.IPs)
	return c.Res.IPs[0].Address.Addr().String()
}

// Addrs lists the addresses the kernel has on c's eth0 (plugintest.AddrsIn): what a
// test compares with what ADD reported.
func (c *Container) Addrs(t testing.TB) []string {
	t.Helper()
	return plugintest.AddrsIn(t, c.NS, "eth0")
}

// LinkOf returns the link ADD made in c (its eth0, the name Invoke passes), which must
// be a T: each plugin's tests read the attributes of its own link type there.
func LinkOf[T netlink.Link](t testing.TB, c *Container) T {
	t.Helper()
	return plugintest.LinkAs[T](t, c.NS, "eth0")
}

// DelAddr removes from c's eth0 the first address ADD gave it, as an operator's `ip
// addr del` would, for a test of what CHECK notices.
func (c *Container) DelAddr(t testing.TB) {
	t.Helper()
	require.NotEmpty(t, c.Res.IPs)
	h := c.NS.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	addr, err := netlink.ParseAddr(c.Res.IPs[0].Address.String())
	require.NoError(t, err)
	require.NoError(t, h.AddrDel(l, addr))
}

// Reach reports whether a TCP connection from `from` to a server in `to` at addr gets
// an answer.
func Reach(t testing.TB, from, to *testns.NS, addr string) error {
	t.Helper()
	port := testns.ServeTCP(t, to, "tcp", ":0", "hello")
	got, err := testns.DialTCP(from, fmt.Sprintf("%s:%d", addr, port), 3*time.Second)
	if err != nil {
		return err
	}
	if got != "hello" {
		return fmt.Errorf("got %q from %s", got, addr)
	}
	return nil
}

// Exec runs the cni binary as the Env's plugin from dir inside the host namespace the
// way a runtime does (env + stdin), as interface eth0 with CNI_PATH dir. It returns
// stdout and the CNI error printed there when the plugin failed.
func (e *Env) Exec(dir, cmd, cid, netns string, conf []byte, extraEnv ...string) (string, *cnierror.Error) {
	e.T.Helper()
	o := plugintest.Exec(e.T, e.Host, plugintest.Call{Bin: filepath.Join(dir, e.Plugin.Name), Command: cmd,
		ContainerID: cid, Netns: netns, IfName: "eth0", Config: conf, Env: extraEnv})
	return o.Stdout, o.CNIError()
}

// PluginDir links the cni binary into a temp dir as the Env's plugin and host-local.
func (e *Env) PluginDir() string {
	return testns.LinkPluginDir(e.T, e.Plugin.Name, "host-local")
}

// Libcni drives the conflist through libcni as an independent client, exec'ing the cni
// binary from a plugin dir inside the host namespace: ADD for c, then CHECK, DEL and
// DEL again.
func (e *Env) Libcni(conflist string, c *Container, capArgs map[string]any) plugintest.LibcniRun {
	e.T.Helper()
	return plugintest.Libcni(e.T, e.Host, e.PluginDir(), conflist,
		&libcni.RuntimeConf{ContainerID: c.ID, NetNS: c.NS.Path, IfName: "eth0", CapabilityArgs: capArgs})
}

// MasterLink is the master in the host namespace.
func (e *Env) MasterLink() netlink.Link {
	e.T.Helper()
	l := plugintest.LinkIn(e.T, e.Host, Master)
	require.NotNil(e.T, l, Master)
	return l
}

// DefaultRouteViaMaster gives the master an address and the host a default route
// through it to the peer, and returns the route, for a test that takes it away.
func (e *Env) DefaultRouteViaMaster() *netlink.Route {
	e.T.Helper()
	testns.Up(e.T, e.Host, Master, "10.90.0.2/24")
	r := &netlink.Route{LinkIndex: e.MasterLink().Attrs().Index, Gw: net.ParseIP(PeerAddr)}
	require.NoError(e.T, e.Host.Handle(e.T).RouteAdd(r))
	return r
}

// Names of the master pair ContainerMaster makes.
const (
	ContainerMasterName = "cmaster" // in the container
	ContainerPeerName   = "cpeer"   // in Env.Peer
)

// ContainerMaster gives c a master of its own for linkInContainer: a veth whose other
// end is in the peer namespace, with addr on the container's end and peerAddr on the
// peer's ("" for none), and returns the container's end.
func (e *Env) ContainerMaster(c *Container, addr, peerAddr string) netlink.Link {
	e.T.Helper()
	var addrs, peerAddrs []string
	if addr != "" {
		addrs, peerAddrs = []string{addr}, []string{peerAddr}
	}
	testns.Veth(e.T, c.NS, ContainerMasterName, addrs, e.Peer, ContainerPeerName, peerAddrs)
	l := plugintest.LinkIn(e.T, c.NS, ContainerMasterName)
	require.NotNil(e.T, l, ContainerMasterName)
	return l
}
