package tap

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// openQueues attaches n queues to the tap inside ns as a VM would, and returns their
// descriptors (closed with the test) or the first error.
func openQueues(t *testing.T, ns *testns.NS, name string, n int, multi bool) error {
	t.Helper()
	return ns.Do(func() error {
		for range n {
			fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			t.Cleanup(func() { unix.Close(fd) })
			ifr, err := unix.NewIfreq(name)
			if err != nil {
				return err
			}
			flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
			if multi {
				flags |= unix.IFF_MULTI_QUEUE
			}
			ifr.SetUint16(flags)
			if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestTapGetsMACAndMTUAndIsUp(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, map[string]any{"mac": "02:aa:bb:cc:dd:01", "mtu": 9000})
	res := e.add(t, conf)
	require.Len(t, res.Interfaces, 1)
	assert.Equal(t, "tap0", res.Interfaces[0].Name)
	assert.Equal(t, "02:aa:bb:cc:dd:01", res.Interfaces[0].Mac)
	assert.Equal(t, e.cont.Path, res.Interfaces[0].Sandbox)
	assert.Equal(t, 9000, res.Interfaces[0].MTU)

	tap := tapIn(t, e.cont, "tap0")
	require.NotNil(t, tap)
	assert.Equal(t, netlink.TUNTAP_MODE_TAP, tap.Mode)
	assert.Equal(t, "02:aa:bb:cc:dd:01", tap.HardwareAddr.String())
	assert.Equal(t, 9000, tap.MTU)
	assert.NotZero(t, tap.Flags&netlink.TUNTAP_VNET_HDR, "virtio-net header, as the reference asks for")
	assert.False(t, tap.NonPersist, "outlives the plugin's descriptor")
	assert.NotZero(t, tap.Attrs().RawFlags&unix.IFF_UP)
	assert.Equal(t, []string{"lo", "tap0"}, pt.Links(t, e.cont), "no temporary name left over")
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.host), "nothing in the host")

	_, err := e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	require.NoError(t, err)
	require.NoError(t, openQueues(t, e.cont, "tap0", 1, false), "a VM can attach")

	// DEL removes the tap, though a VM still holds a queue, and CHECK then fails.
	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	assert.Error(t, err, "CHECK after DEL")
}

func TestMultiQueueTapTakesSeveralQueues(t *testing.T) {
	for _, multi := range []bool{true, false} {
		t.Run(fmt.Sprintf("multiQueue=%v", multi), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := e.config(t, map[string]any{"multiQueue": multi})
			res := e.add(t, conf)
			tap := tapIn(t, e.cont, "tap0")
			assert.Equal(t, multi, tap.Flags&netlink.TUNTAP_MULTI_QUEUE != 0)
			err := openQueues(t, e.cont, "tap0", 4, multi)
			if !multi {
				require.ErrorIs(t, err, unix.EBUSY, "a single-queue tap takes one attachment")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, 4, tapIn(t, e.cont, "tap0").Queues)
			_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err)
		})
	}
}

func TestOwnerAndGroupDecideWhoMayAttach(t *testing.T) {
	helper := tapAttachHelper(t)
	for _, tc := range []struct {
		name     string
		conf     map[string]any
		attempts map[[2]int]int // uid, gid -> exit status (0 attached, 3 refused)
	}{
		{"owner and group", map[string]any{"owner": 1234, "group": 5678},
			map[[2]int]int{{1234, 5678}: 0, {4321, 5678}: 3, {1234, 9999}: 3}},
		// Only the owner is set: no TUNSETGROUP, so any group of that user will do. A
		// tap made by netlink.Tuntap would get group 0 (root) and refuse 1234:5678.
		{"owner only", map[string]any{"owner": 1234}, map[[2]int]int{{1234, 5678}: 0, {4321, 5678}: 3}},
		{"group only", map[string]any{"group": 5678}, map[[2]int]int{{4321, 5678}: 0, {4321, 9999}: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := e.config(t, tc.conf)
			res := e.add(t, conf)
			tap := tapIn(t, e.cont, "tap0")
			if o, ok := tc.conf["owner"]; ok {
				assert.Equal(t, uint32(o.(int)), tap.Owner)
			}
			if g, ok := tc.conf["group"]; ok {
				assert.Equal(t, uint32(g.(int)), tap.Group)
			}
			_, err := e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err)
			for who, want := range tc.attempts {
				assert.Equal(t, want, e.attachAs(t, helper, "tap0", who[0], who[1], false), "uid %d gid %d", who[0], who[1])
			}
		})
	}
}

func TestTapIsEnslavedToABridgeInsideTheContainer(t *testing.T) {
	e := newEnv(t)
	h := e.cont.Handle(t)
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}))
	br, err := h.LinkByName("br0")
	require.NoError(t, err)
	conf := e.config(t, map[string]any{"bridge": "br0"})
	res := e.add(t, conf)
	assert.Equal(t, br.Attrs().Index, tapIn(t, e.cont, "tap0").MasterIndex)
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	require.NoError(t, err)

	// CHECK notices the tap leaving the bridge.
	tap, err := h.LinkByName("tap0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetNoMaster(tap))
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	assert.ErrorContains(t, err, "br0")
}

func TestMACFromCNIArgsAndRuntimeConfigWin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conf    map[string]any
		cniArgs string
		want    string
	}{
		{"config", map[string]any{"mac": "02:00:00:00:00:01"}, "", "02:00:00:00:00:01"},
		{"CNI_ARGS over config", map[string]any{"mac": "02:00:00:00:00:01"}, "IgnoreUnknown=1;MAC=02:00:00:00:00:02", "02:00:00:00:00:02"},
		{"runtimeConfig over both", map[string]any{"mac": "02:00:00:00:00:01", "runtimeConfig": map[string]any{"mac": "02:00:00:00:00:03"}},
			"MAC=02:00:00:00:00:02", "02:00:00:00:00:03"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.cniArgs = tc.cniArgs
			res := e.add(t, e.config(t, tc.conf))
			assert.Equal(t, tc.want, res.Interfaces[0].Mac)
			assert.Equal(t, tc.want, tapIn(t, e.cont, "tap0").HardwareAddr.String())
		})
	}
}

func TestAddressesFromIPAM(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, e.withIPAM(nil, "10.40.0.0/24"))
	res := e.add(t, conf)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.40.0.2/24", res.IPs[0].Address.String())
	require.NotNil(t, res.IPs[0].Interface)
	assert.Equal(t, 0, *res.IPs[0].Interface)
	addrs, err := e.cont.Handle(t).AddrList(tapIn(t, e.cont, "tap0"), netlink.FAMILY_V4)
	require.NoError(t, err)
	require.Len(t, addrs, 1)
	assert.Equal(t, "10.40.0.2/24", addrs[0].IPNet.String())
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t))
}

func TestDelIsIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, e *env)
	}{
		{"twice", nil},
		{"netns gone", func(t *testing.T, e *env) { e.cont.Close(); e.netns = t.TempDir() + "/gone" }},
		{"no netns", func(t *testing.T, e *env) { e.netns = pt.NoNetns }},
		{"tap already deleted", func(t *testing.T, e *env) {
			h := e.cont.Handle(t)
			l, err := h.LinkByName("tap0")
			require.NoError(t, err)
			require.NoError(t, h.LinkDel(l))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := e.config(t, e.withIPAM(nil, "10.40.0.0/24"))
			e.add(t, conf)
			if tc.before != nil {
				tc.before(t, e)
			}
			for i := range 2 {
				_, err := e.invoke(skel.CmdDel, conf)
				require.NoError(t, err, "DEL %d", i+1)
			}
			assert.Empty(t, e.reservations(t), "IPAM released in every case")
			if e.netns == "" {
				assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
			}
		})
	}
}

func TestFailedAddLeavesNothing(t *testing.T) {
	e := newEnv(t)
	extra := e.withIPAM(map[string]any{"mac": "02:00:00:00:00:07"}, "10.40.0.0/24")
	extra["ipam"].(map[string]any)["routes"] = []map[string]string{{"dst": "192.168.0.0/16", "gw": "10.99.0.1"}}
	_, err := e.invoke(skel.CmdAdd, e.config(t, extra))
	require.ErrorContains(t, err, "192.168.0.0/16", "fails at the route, after the tap and IPAM")
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Empty(t, e.reservations(t))
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.host))
}

func TestBadInputNamesTheFieldAndLeavesNothing(t *testing.T) {
	e := newEnv(t)
	testns.Veth(t, e.cont, "notbr", nil, testns.New(t), "x", nil)
	for _, tc := range []struct {
		name    string
		conf    map[string]any
		cniArgs string
		field   string
	}{
		{"mtu too small", map[string]any{"mtu": 10}, "", "mtu"},
		{"mtu too large", map[string]any{"mtu": 70000}, "", "mtu"},
		{"bad mac", map[string]any{"mac": "02:00"}, "", "mac"},
		{"multicast mac", map[string]any{"mac": "01:00:5e:00:00:01"}, "", "mac"},
		{"bad CNI_ARGS MAC", nil, "MAC=zz", "CNI_ARGS MAC"},
		{"bad runtimeConfig mac", map[string]any{"runtimeConfig": map[string]any{"mac": "x"}}, "", "runtimeConfig.mac"},
		{"bad bridge name", map[string]any{"bridge": "a b"}, "", "bridge"},
		{"missing bridge", map[string]any{"bridge": "br9"}, "", "bridge"},
		{"bridge that is no bridge", map[string]any{"bridge": "notbr"}, "", "bridge"},
		{"bad selinuxContext", map[string]any{"selinuxContext": "unconfined"}, "", "selinuxContext"},
		{"negative owner", map[string]any{"owner": -1}, "", "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.cniArgs = tc.cniArgs
			_, err := e.invoke(skel.CmdAdd, e.config(t, tc.conf))
			var ce *cnierror.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, cnierror.CodeInvalidConfig, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tc.field)
			assert.Equal(t, []string{"lo", "notbr"}, pt.Links(t, e.cont), "no tap, no temporary name left")
		})
	}
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.host))
}

func TestInterfaceNameTakenIsInvalidEnv(t *testing.T) {
	e := newEnv(t)
	e.add(t, e.config(t, nil))
	_, err := e.invoke(skel.CmdAdd, e.config(t, nil))
	var ce *cnierror.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cnierror.CodeInvalidEnv, ce.Code)
	assert.Contains(t, ce.Msg, "tap0", "the error names the interface")
	assert.Equal(t, []string{"lo", "tap0"}, pt.Links(t, e.cont), "the existing tap is untouched, no temporary one left")
}

func TestSelinuxContextWithoutSELinuxIsReportedNotApplied(t *testing.T) {
	if selinuxEnabled() {
		t.Skip("SELinux is enabled here: the labelled path runs instead")
	}
	e := newEnv(t)
	e.add(t, e.config(t, map[string]any{"selinuxcontext": "system_u:system_r:container_t:s0:c1,c2"}))
	assert.NotNil(t, tapIn(t, e.cont, "tap0"))
	assert.Contains(t, e.stderr.String(), `SELinux is not enabled: selinuxContext "system_u:system_r:container_t:s0:c1,c2" not applied`,
		"the lower-case spelling of the reference's docs is read too")
}

// The exec label is written only into procfs's own attribute file: a /proc that is not
// procfs is refused before anything is opened in it (upstream row P23).
func TestThreadAttrIsOpenedOnlyOnProcfs(t *testing.T) {
	f, err := openThreadAttr("/proc", "exec")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	fake := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(fake, "thread-self", "attr"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fake, "thread-self", "attr", "exec"), nil, 0o600))
	_, err = openThreadAttr(fake, "exec")
	assert.ErrorContains(t, err, "is not on procfs")
}

func TestCreatorProcessMakesTheTapInTheContainer(t *testing.T) {
	testns.RequireRoot(t)
	cont := testns.NewWithLoopback(t)
	n, err := link.Open(cont.Path)
	require.NoError(t, err)
	defer n.Close()
	owner := uint32(1234)
	spec := tapSpec{Name: "made0", MultiQueue: true, Owner: &owner}
	// No label: SELinux is not needed to prove that the exec'd creator builds the tap
	// in the netns of the thread that started it.
	require.NoError(t, createLabelled(testns.Binary(t), "", n, spec))
	tap := tapIn(t, cont, "made0")
	require.NotNil(t, tap)
	assert.Equal(t, owner, tap.Owner)
	assert.NotZero(t, tap.Flags&netlink.TUNTAP_MULTI_QUEUE)

	err = createLabelled(testns.Binary(t), "", n, spec)
	assert.ErrorContains(t, err, "TUNSETIFF", "the creator's failure reaches the plugin")
	assert.Equal(t, 1, RunCreator([]string{"too", "few"}, io.Discard))
}

func TestGCAndStatusAskIPAM(t *testing.T) {
	e := newEnv(t)
	conf := e.config(t, e.withIPAM(nil, "10.40.0.0/24"))
	res := e.add(t, conf)
	keep := pt.WithKeys(t, conf, map[string]any{"cni.dev/valid-attachments": []skel.Attachment{{ContainerID: "c1", IfName: "tap0"}}})
	_, err := e.invoke(skel.CmdGC, keep)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.40.0.2"}, e.reservations(t), "GC keeps a valid attachment's address")
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	require.NoError(t, err, "CHECK after a GC that keeps it")

	gcConf := pt.WithKeys(t, conf, map[string]any{"cni.dev/valid-attachments": []skel.Attachment{}})
	_, err = e.invoke(skel.CmdGC, gcConf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t))
	_, err = e.invoke(skel.CmdStatus, conf)
	assert.NoError(t, err)
	_, err = e.invoke(skel.CmdStatus, e.config(t, nil))
	assert.NoError(t, err, "no IPAM: nothing to ask")
}

func TestAddDelInEverySpecVersion(t *testing.T) {
	for _, v := range version.All() {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := pt.WithKeys(t, e.config(t, e.withIPAM(map[string]any{"mac": "02:00:00:00:00:09"}, "10.40.0.0/24")), map[string]any{"cniVersion": v})
			res, err := e.invoke(skel.CmdAdd, conf)
			require.NoError(t, err)
			assert.Equal(t, v, res.CNIVersion)
			require.NotEmpty(t, res.IPs)
			if version.AtLeast(v, "0.4.0") {
				_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
				assert.NoError(t, err)
			}
			_, err = e.invoke(skel.CmdDel, conf)
			require.NoError(t, err)
			assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
			assert.Empty(t, e.reservations(t))
		})
	}
}
