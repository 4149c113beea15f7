package hostdevice

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// env is one test's world: the plugin runs in host, moves devices into cont; each test
// device is a veth whose other end sits in peer, so the device has somewhere to talk to.
type env struct {
	t                testing.TB
	host, cont, peer *testns.NS
	dataDir          string // host-device state
	ipamDir          string // host-local reservations
	sys              sysfs  // a fake /sys
	// netns overrides cont.Path as CNI_NETNS when set (plugintest.NetnsOf).
	netns  string
	stderr bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host, cont := pt.HostAndContainer(t)
	return &env{t: t, host: host, cont: cont, peer: testns.NewWithLoopback(t),
		dataDir: t.TempDir(), ipamDir: t.TempDir(), sys: sysfs{root: t.TempDir()}}
}

// device creates a veth end called name in the host (its peer, name+"p", in peer with
// peerAddrs), with the given MTU and up state, and returns its attributes.
func (e *env) device(t *testing.T, name string, mtu int, up bool, peerAddrs ...string) netlink.LinkAttrs {
	t.Helper()
	testns.Veth(t, e.host, name, nil, e.peer, name+"p", peerAddrs)
	h := e.host.Handle(t)
	l, err := h.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMTU(l, mtu))
	if !up {
		require.NoError(t, h.LinkSetDown(l))
	}
	l, err = h.LinkByName(name)
	require.NoError(t, err)
	return *l.Attrs()
}

// config builds a host-device config; extra keys are merged in at the top level, a nil
// value removes a key.
func (e *env) config(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	return pt.Config(t, map[string]any{"cniVersion": "1.1.0", "name": "hdnet", "type": "host-device", "dataDir": e.dataDir}, extra)
}

// withIPAM adds a host-local range.
func (e *env) withIPAM(extra map[string]any, subnet string) map[string]any {
	return pt.Merged(map[string]any{"ipam": pt.HostLocal(e.ipamDir, subnet)}, extra)
}

func (e *env) netnsPath() string {
	return pt.NetnsOf(e.cont, e.netns)
}

func (e *env) invokeAs(cmd, cid, ifName string, config []byte) (*result.Result, error) {
	return pt.InvokeLogged(e.t, e.host, newPlugin(e.sys),
		pt.Call{Command: cmd, ContainerID: cid, Netns: e.netnsPath(), IfName: ifName, Config: config}, &e.stderr)
}

func (e *env) invoke(cmd string, config []byte) (*result.Result, error) {
	return e.invokeAs(cmd, "c1", "eth0", config)
}

func (e *env) add(t *testing.T, config []byte) *result.Result {
	t.Helper()
	res, err := e.invoke(skel.CmdAdd, config)
	require.NoError(t, err)
	return res
}

// requireHome checks that the device called name is back in the host with mtu, up and
// no alias, and that no state is left, and returns it.
func (e *env) requireHome(t *testing.T, name string, mtu int, up bool) *netlink.LinkAttrs {
	t.Helper()
	back := pt.AttrsIn(t, e.host, name)
	require.NotNil(t, back, "%s is back in the host", name)
	assert.Equal(t, mtu, back.MTU)
	assert.Equal(t, up, back.Flags&net.FlagUp != 0, "up")
	assert.Empty(t, back.Alias)
	assert.Empty(t, e.states(t))
	return back
}

// states lists the state files left in the data dir.
func (e *env) states(t *testing.T) []string { return pt.Entries(t, e.dataDir) }

// reservations lists host-local's address files.
func (e *env) reservations(t *testing.T) []string {
	return pt.Reservations(t, filepath.Join(e.ipamDir, "hdnet"))
}

// fakePCI adds a PCI function to the fake sysfs, bound to driver ("" for none), with
// the given network interfaces.
func (e *env) fakePCI(t *testing.T, addr, driver string, netdevs ...string) {
	t.Helper()
	dev := e.sys.pciDevice(addr)
	fakeNetdevs(t, dev, netdevs)
	if driver != "" {
		drv := filepath.Join(e.sys.root, "bus", "pci", "drivers", driver)
		require.NoError(t, os.MkdirAll(drv, 0o755))
		require.NoError(t, os.Symlink("../../../../bus/pci/drivers/"+driver, filepath.Join(dev, "driver")))
	}
}

func (e *env) fakeAux(t *testing.T, name string, netdevs ...string) {
	t.Helper()
	fakeNetdevs(t, e.sys.auxDevice(name), netdevs)
}

func (e *env) fakeKernelPath(t *testing.T, path string, netdevs ...string) {
	t.Helper()
	fakeNetdevs(t, e.sys.kernelPath(path), netdevs)
}

func fakeNetdevs(t *testing.T, dev string, netdevs []string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dev, 0o755))
	for _, n := range netdevs {
		require.NoError(t, os.MkdirAll(filepath.Join(dev, "net", n), 0o755))
	}
}

// assertUntouched checks that a refused call left the device orig where it was, as it
// was (name, MAC, MTU, up, no alias), the container with only lo, no state and no
// reservation.
func assertUntouched(t *testing.T, e *env, orig netlink.LinkAttrs) {
	t.Helper()
	now := pt.AttrsIn(t, e.host, orig.Name)
	if assert.NotNil(t, now, "%s stays in the host", orig.Name) {
		assert.Equal(t, orig.HardwareAddr, now.HardwareAddr)
		assert.Equal(t, orig.MTU, now.MTU)
		assert.Equal(t, orig.Flags&net.FlagUp, now.Flags&net.FlagUp, "up state")
		assert.Empty(t, now.Alias)
	}
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont), "nothing moved into the container")
	assert.Empty(t, e.states(t), "no state")
	assert.Empty(t, e.reservations(t), "no reservation")
}
