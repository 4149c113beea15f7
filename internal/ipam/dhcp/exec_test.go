package dhcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execIPAM runs a dhcp plugin binary as a runtime would, in the lab's host namespace,
// for c (nil for STATUS and GC, which name no attachment), and returns its stdout and
// the CNI error it printed there.
func execIPAM(t testing.TB, host *testns.NS, bin, cmd string, c *ctr, conf []byte) (string, error) {
	t.Helper()
	call := pt.Call{Bin: bin, Command: cmd, Config: conf}
	if c != nil {
		call.ContainerID, call.Netns, call.IfName = c.id, c.ns.Path, "eth0"
	}
	o := pt.Exec(t, host, call)
	if o.Stderr != "" {
		t.Logf("%s %s stderr: %s", filepath.Base(bin), cmd, o.Stderr)
	}
	return o.Stdout, o.Err
}

func ipamOnlyConf(t testing.TB, socket string) []byte { return ipamConf(t, socket, nil) }

// ipamConf is the IPAM-only config with extra ipam keys.
func ipamConf(t testing.TB, socket string, keys map[string]any) []byte {
	ipam := map[string]any{"type": "dhcp", "daemonSocketPath": socket}
	for k, v := range keys {
		ipam[k] = v
	}
	return pt.Config(t, map[string]any{"cniVersion": "1.1.0", "name": "dhcpnet", "ipam": ipam})
}

func TestStatusIsNotAvailableWithoutADaemon(t *testing.T) {
	testns.RequireRoot(t)
	bin := testns.LinkPlugin(t, "dhcp")
	host := testns.New(t)
	out, err := execIPAM(t, host, bin, "STATUS", nil, ipamOnlyConf(t, filepath.Join(t.TempDir(), "none.sock")))
	require.Error(t, err)
	var e struct{ Code uint }
	require.NoError(t, json.Unmarshal([]byte(out), &e), out)
	assert.Equal(t, cnierror.CodeNotAvailable, e.Code)

	// DEL has nothing to release without a daemon, and says so without failing.
	c := &ctr{ns: testns.New(t), id: "nodaemon"}
	_, err = execIPAM(t, host, bin, "DEL", c, ipamOnlyConf(t, filepath.Join(t.TempDir(), "none.sock")))
	assert.NoError(t, err)
}

func TestSocketPathThatIsNotASocketIsAClearConfigError(t *testing.T) {
	testns.RequireRoot(t)
	file := filepath.Join(t.TempDir(), "not-a-socket")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	w := &world{t: t}
	c := &ctr{ns: testns.New(t), id: "sock"}
	err := w.ipamCmd("ADD", c, ipamOnlyConf(t, file))
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "ipam.daemonSocketPath", "not a unix socket")
}

func TestStatusWithTheDaemonUpSucceedsAndThePidfileNamesIt(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "dhcp.pid")
	w := newWorld(t, dhcptest.Options{}, "-pidfile", pidFile)
	assert.NoError(t, w.ipamCmd("STATUS", nil, ipamOnlyConf(t, w.daemon.Socket)))
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n", w.daemon.Pid()), string(b))
}

// TestLibcniBridgeDHCPAddCheckDel drives the exec'd binary through the reference
// runtime library: bridge from CNI_PATH delegating to dhcp in-process.
func TestLibcniBridgeDHCPAddCheckDel(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	dir := testns.LinkPluginDir(t, "bridge", "dhcp")
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
	list, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.1.0","name":"dhcpnet","plugins":[{"type":"bridge","bridge":"` +
		dhcptest.Bridge + `","ipam":{"type":"dhcp","daemonSocketPath":"` + w.daemon.Socket + `"}}]}`))
	require.NoError(t, err)
	c := w.newCtr()
	rt := &libcni.RuntimeConf{ContainerID: c.id, NetNS: c.ns.Path, IfName: "eth0"}
	ctx := context.Background()
	w.lab.Host.Run(t, func() error {
		res, err := cni.AddNetworkList(ctx, list, rt)
		require.NoError(t, err)
		r, err := types100.GetResult(res)
		require.NoError(t, err)
		require.Len(t, r.IPs, 1)
		le, ok := w.lab.LeaseOf(c.clientID())
		require.True(t, ok)
		assert.Equal(t, le.IP, r.IPs[0].Address.IP.String())
		assert.Equal(t, []string{dhcptest.DNSServer}, r.DNS.Nameservers)

		require.NoError(t, cni.CheckNetworkList(ctx, list, rt))
		require.NoError(t, cni.GetStatusNetworkList(ctx, list))
		require.NoError(t, cni.DelNetworkList(ctx, list, rt))
		require.NoError(t, cni.DelNetworkList(ctx, list, rt), "DEL twice")
		return nil
	})
	assert.True(t, w.lab.Released(c.clientID()), "DEL released the lease at the server")
	assert.Empty(t, w.heldFiles(), "the daemon keeps no lease for the attachment")
	assert.Equal(t, []string{"lo"}, pt.Links(t, c.ns), "DEL removed eth0 from the container")
}

// TestSocketActivation passes the daemon a listening socket as systemd does (fd 3,
// LISTEN_PID and LISTEN_FDS): it serves on it instead of making its own.
func TestSocketActivation(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	sock := filepath.Join(t.TempDir(), "activated.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ul := l.(*net.UnixListener)
	f, err := ul.File()
	require.NoError(t, err)
	ul.SetUnlinkOnClose(false)
	ul.Close() // the daemon holds the duplicate
	defer f.Close()

	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" dhcp daemon -socketpath /nonexistent/never.sock -statedir "$1"`,
		testns.Binary(t), filepath.Join(t.TempDir(), "leases"))
	cmd.ExtraFiles = []*os.File{f}
	var logs bytes.Buffer
	cmd.Stderr = &logs
	host.Run(t, cmd.Start)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); t.Logf("daemon log:\n%s", logs.String()) })

	w := &world{t: t}
	assert.Eventually(t, func() bool { return w.ipamCmd("STATUS", nil, ipamOnlyConf(t, sock)) == nil }, 10*time.Second, 50*time.Millisecond)
	_, err = os.Stat("/nonexistent/never.sock")
	assert.True(t, os.IsNotExist(err), "no socket of its own")
}

// TestMacvlanInterfaceGetsALease runs the IPAM plugin alone on a macvlan whose parent is
// the lab's bridge, the way the macvlan plugin will delegate to it: the DHCP side does not
// care which main plugin made the interface, only that it reaches the server. The link
// is left down, as a main plugin leaves it before IPAM.
func TestMacvlanInterfaceGetsALease(t *testing.T) {
	w := newWorld(t, dhcptest.Options{})
	c := w.newCtr()
	h := w.lab.Host.Handle(t)
	parent, err := h.LinkByName(dhcptest.Bridge)
	require.NoError(t, err)
	f, err := os.Open(c.ns.Path)
	require.NoError(t, err)
	defer f.Close()
	mv := &netlink.Macvlan{Mode: netlink.MACVLAN_MODE_BRIDGE, LinkAttrs: netlink.LinkAttrs{
		Name: "mv0", ParentIndex: parent.Attrs().Index, Namespace: netlink.NsFd(f.Fd())}}
	require.NoError(t, h.LinkAdd(mv))
	ch := c.ns.Handle(t)
	l, err := ch.LinkByName("mv0")
	require.NoError(t, err)
	require.NoError(t, ch.LinkSetName(l, "eth0"))

	conf := ipamOnlyConf(t, w.daemon.Socket)
	var res *result.Result
	w.lab.Host.Run(t, func() error {
		res, err = skel.Invoke(context.Background(), dhcp.Plugin(), skel.Args{Command: "ADD", ContainerID: c.id,
			Netns: c.ns.Path, IfName: "eth0", Path: []string{t.TempDir()}}, conf, os.Stderr)
		return err
	})
	require.Len(t, res.IPs, 1)
	le, ok := w.lab.LeaseOf(c.clientID())
	require.True(t, ok)
	assert.Equal(t, le.IP, res.IPs[0].Address.Addr().String())
	assert.NoError(t, w.ipamCmd("CHECK", c, conf))
	assert.NoError(t, w.ipamCmd("DEL", c, conf))
	assert.True(t, w.lab.Released(c.clientID()))
	assert.Empty(t, w.heldFiles(), "DEL dropped the kept lease")
	assert.Error(t, w.ipamCmd("CHECK", c, conf), "CHECK after DEL fails")
	assert.NoError(t, w.ipamCmd("DEL", c, conf), "DEL twice")
}

// TestDaemonSocketIsPrivateEvenUnderUmaskZero: the socket is made 0600 whatever the
// umask (it was 0777 under umask 0, so any user could take or release leases), and a
// caller of another user who still reaches it (a socket opened up by hand) is refused by
// its peer credentials with a message, not served.
func TestDaemonSocketIsPrivateEvenUnderUmaskZero(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	dir := dhcptest.OpenTempDir(t)
	sock := filepath.Join(dir, "dhcp.sock")
	cmd := exec.Command("sh", "-c", `umask 0; exec "$0" dhcp daemon -socketpath "$1" -statedir "$2"`,
		testns.Binary(t), sock, filepath.Join(t.TempDir(), "leases"))
	var logs bytes.Buffer
	cmd.Stderr = &logs
	host.Run(t, cmd.Start)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); t.Logf("daemon log:\n%s", logs.String()) })
	require.Eventually(t, func() bool { _, err := os.Stat(sock); return err == nil }, 10*time.Second, 20*time.Millisecond)

	st, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "socket mode under umask 0")

	conf := ipamOnlyConf(t, sock)
	status := func() (err error) {
		dhcptest.AsUser(t, dhcptest.Nobody, func() {
			_, err = skel.Invoke(context.Background(), dhcp.Plugin(), skel.Args{Command: "STATUS", Path: []string{dir}}, conf, io.Discard)
		})
		return err
	}
	assert.ErrorContains(t, status(), "permission denied", "the socket's mode keeps other users out")

	require.NoError(t, os.Chmod(sock, 0o666))
	err = status()
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, fmt.Sprintf("uid %d may not use the dhcp daemon", dhcptest.Nobody))
	assert.NoError(t, (&world{t: t}).ipamCmd("STATUS", nil, conf), "root is served")
}
