package hostdevice

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestDeviceMovesInAndComesBackWithNameMTUAndUpState(t *testing.T) {
	for _, up := range []bool{true, false} {
		t.Run(fmt.Sprintf("up=%v", up), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			orig := e.device(t, "hd0", 1400, up)
			conf := e.config(t, map[string]any{"device": "hd0"})

			res := e.add(t, conf)
			require.Len(t, res.Interfaces, 1)
			assert.Equal(t, "eth0", res.Interfaces[0].Name)
			assert.Equal(t, e.cont.Path, res.Interfaces[0].Sandbox)
			assert.Equal(t, orig.HardwareAddr.String(), res.Interfaces[0].Mac)
			assert.Nil(t, pt.AttrsIn(t, e.host, "hd0"), "gone from the host")
			in := pt.AttrsIn(t, e.cont, "eth0")
			require.NotNil(t, in)
			assert.Equal(t, "hd0", in.Alias, "the host name is kept in the alias, as the reference does")
			assert.Equal(t, orig.HardwareAddr, in.HardwareAddr)
			assert.NotZero(t, in.Flags&net.FlagUp, "up in the container")

			_, err := e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err)

			// What the container did to it meanwhile is undone.
			h := e.cont.Handle(t)
			l, err := h.LinkByName("eth0")
			require.NoError(t, err)
			require.NoError(t, h.LinkSetMTU(l, 1300))
			require.NoError(t, h.LinkSetUp(l))

			for i := range 2 {
				_, err = e.invoke(skel.CmdDel, conf)
				require.NoError(t, err, "DEL %d", i+1)
				back := pt.AttrsIn(t, e.host, "hd0")
				require.NotNil(t, back, "back in the host under its name after DEL %d", i+1)
				assert.Equal(t, 1400, back.MTU)
				assert.Equal(t, up, back.Flags&net.FlagUp != 0)
				assert.Empty(t, back.Alias)
				assert.Equal(t, orig.HardwareAddr, back.HardwareAddr)
				assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
			}
			assert.Empty(t, e.states(t))
			_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			assert.ErrorContains(t, err, "eth0", "CHECK after DEL misses the device in the container")
		})
	}
}

func TestAddressesFromIPAMCarryTraffic(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true, "10.20.0.1/24")
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	res := e.add(t, conf)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.20.0.2/24", res.IPs[0].Address.String())
	require.NotNil(t, res.IPs[0].Interface)
	assert.Equal(t, 0, *res.IPs[0].Interface)
	assert.Equal(t, []string{res.IPs[0].Address.String()}, pt.AddrsIn(t, e.cont, "eth0"), "the kernel holds the reported address")

	port := testns.ServeTCP(t, e.peer, "tcp", ":0", "hello")
	got, err := testns.DialTCP(e.cont, fmt.Sprintf("10.20.0.1:%d", port), 5*time.Second)
	require.NoError(t, err, "the container talks through the moved device")
	assert.Equal(t, "hello", got)

	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t))
	back := pt.AttrsIn(t, e.host, "hd0")
	require.NotNil(t, back)
	// The container's address does not come back to the host with the device.
	addrs, err := e.host.Handle(t).AddrList(&netlink.Dummy{LinkAttrs: *back}, netlink.FAMILY_V4)
	require.NoError(t, err)
	assert.Empty(t, addrs)
}

func TestEverySelectorFindsTheDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conf  func(e *env, mac string) map[string]any
		setup func(t *testing.T, e *env)
	}{
		{"hwaddr", func(e *env, mac string) map[string]any { return map[string]any{"hwaddr": mac} }, nil},
		{"kernelpath", func(*env, string) map[string]any {
			return map[string]any{"kernelpath": "/sys/devices/pci0000:00/0000:00:05.0"}
		}, func(t *testing.T, e *env) { e.fakeKernelPath(t, "/sys/devices/pci0000:00/0000:00:05.0", "hd0") }},
		{"pciBusID", func(*env, string) map[string]any { return map[string]any{"pciBusID": "0000:00:05.0"} },
			func(t *testing.T, e *env) { e.fakePCI(t, "0000:00:05.0", "virtio-pci", "hd0") }},
		{"pciBusID of a virtio function", func(*env, string) map[string]any { return map[string]any{"pciBusID": "0000:00:06.0"} },
			func(t *testing.T, e *env) {
				fakeNetdevs(t, filepath.Join(e.sys.pciDevice("0000:00:06.0"), "virtio3"), []string{"hd0"})
			}},
		{"deviceID as PCI address", func(*env, string) map[string]any {
			return map[string]any{"runtimeConfig": map[string]any{"deviceID": "0000:3b:02.1"}}
		}, func(t *testing.T, e *env) { e.fakePCI(t, "0000:3b:02.1", "iavf", "hd0") }},
		{"deviceID as auxiliary device", func(*env, string) map[string]any {
			return map[string]any{"runtimeConfig": map[string]any{"deviceID": "mlx5_core.sf.4"}}
		}, func(t *testing.T, e *env) { e.fakeAux(t, "mlx5_core.sf.4", "hd0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			orig := e.device(t, "hd0", 1500, true)
			e.device(t, "other0", 1500, true)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			conf := e.config(t, tc.conf(e, orig.HardwareAddr.String()))
			res := e.add(t, conf)
			assert.Equal(t, orig.HardwareAddr.String(), res.Interfaces[0].Mac)
			assert.Equal(t, "hd0", pt.AttrsIn(t, e.cont, "eth0").Alias)
			assert.NotNil(t, pt.AttrsIn(t, e.host, "other0"), "only the selected device moves")
			_, err := e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err)
			_, err = e.invoke(skel.CmdDel, conf)
			require.NoError(t, err)
			assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
		})
	}
}

func TestDPDKModeMovesNothingAndReportsAddresses(t *testing.T) {
	for _, driver := range []string{"vfio-pci", "uio_pci_generic", "igb_uio"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.fakePCI(t, "0000:3b:02.1", driver)
			conf := e.config(t, e.withIPAM(map[string]any{"pciBusID": "0000:3b:02.1"}, "10.30.0.0/24"))
			hostBefore := pt.Links(t, e.host)

			res := e.add(t, conf)
			require.Len(t, res.IPs, 1)
			assert.Equal(t, "10.30.0.2/24", res.IPs[0].Address.String())
			require.Len(t, res.Interfaces, 1, "the IPs point at a listed interface")
			assert.Equal(t, "eth0", res.Interfaces[0].Name, "CNI_IFNAME, as the reference since v1.7.0 (upstream row P5)")
			require.NotNil(t, res.IPs[0].Interface)
			assert.Equal(t, 0, *res.IPs[0].Interface)
			assert.Equal(t, "0000:3b:02.1", res.Interfaces[0].PciID)
			assert.Equal(t, e.cont.Path, res.Interfaces[0].Sandbox)
			assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont), "nothing moved")
			assert.Equal(t, hostBefore, pt.Links(t, e.host))
			assert.Len(t, e.reservations(t), 1)

			_, err := e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
			require.NoError(t, err)
			for range 2 {
				_, err = e.invoke(skel.CmdDel, conf)
				require.NoError(t, err)
			}
			assert.Empty(t, e.reservations(t))
		})
	}
}

func TestDelAfterNetnsDiedReportsAVirtualDeviceGone(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	e.add(t, conf)
	// The veth dies with the namespace (a physical device would return to the initial
	// netns instead, see the next test).
	e.cont.Close()
	e.netns = filepath.Join(t.TempDir(), "gone")
	for range 2 {
		_, err := e.invoke(skel.CmdDel, conf)
		require.NoError(t, err)
	}
	assert.Contains(t, e.stderr.String(), "hd0 (eth0 of container c1) is gone")
	assert.Nil(t, pt.AttrsIn(t, e.host, "hd0"))
	assert.Empty(t, e.reservations(t))
	assert.Empty(t, e.states(t))
}

// simulateReturn does what the kernel does to a physical device when its netns dies:
// the device goes to the initial netns under its container name, alias and all.
func (e *env) simulateReturn(t *testing.T, cont *testns.NS, ifName string) {
	t.Helper()
	h := cont.Handle(t)
	l, err := h.LinkByName(ifName)
	require.NoError(t, err)
	require.NoError(t, h.LinkSetDown(l))
	f, err := os.Open(e.host.Path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, h.LinkSetNsFd(l, int(f.Fd())))
	cont.Close()
}

func TestDelAfterNetnsDiedBringsAReturnedDeviceHome(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true)
	conf := e.config(t, map[string]any{"device": "hd0"})
	e.add(t, conf)
	h := e.cont.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMTU(l, 1280))
	mac := l.Attrs().HardwareAddr.String()
	require.NoError(t, h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0, 0, 0, 0x12, 0x34}))
	e.simulateReturn(t, e.cont, "eth0")
	e.netns = filepath.Join(t.TempDir(), "gone")

	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	back := pt.AttrsIn(t, e.host, "hd0")
	require.NotNil(t, back, "renamed back from eth0")
	assert.Nil(t, pt.AttrsIn(t, e.host, "eth0"))
	assert.Equal(t, 1400, back.MTU)
	assert.Equal(t, mac, back.HardwareAddr.String(), "the MAC changed in the container is put back")
	assert.NotZero(t, back.Flags&net.FlagUp)
	assert.Empty(t, back.Alias)
	assert.Contains(t, e.stderr.String(), "came back to the host as eth0")
	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err, "DEL twice")
}

// TestDelAfterNetnsDiedRestoresADeviceReturnedUnderItsOwnName: with CNI_IFNAME the
// device's own name, the kernel's return already gives it its name back, but down and
// with ADD's alias; DEL still restores it.
func TestDelAfterNetnsDiedRestoresADeviceReturnedUnderItsOwnName(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true)
	conf := e.config(t, map[string]any{"device": "hd0"})
	_, err := e.invokeAs(skel.CmdAdd, "c1", "hd0", conf)
	require.NoError(t, err)
	h := e.cont.Handle(t)
	l, err := h.LinkByName("hd0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetMTU(l, 1280))
	e.simulateReturn(t, e.cont, "hd0")
	e.netns = filepath.Join(t.TempDir(), "gone")

	_, err = e.invokeAs(skel.CmdDel, "c1", "hd0", conf)
	require.NoError(t, err)
	e.requireHome(t, "hd0", 1400, true)
}

// TestAttachmentsWhoseIdsAndNamesShareUnderscoresKeepApartStates: container "c_1" with
// interface "x" and container "c" with "1_x" would share a state file named with '_'.
func TestAttachmentsWhoseIdsAndNamesShareUnderscoresKeepApartStates(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true)
	e.device(t, "hd1", 1500, true)
	_, err := e.invokeAs(skel.CmdAdd, "c_1", "x", e.config(t, map[string]any{"device": "hd0"}))
	require.NoError(t, err)
	conf1 := e.config(t, map[string]any{"device": "hd1"})
	_, err = e.invokeAs(skel.CmdAdd, "c", "1_x", conf1)
	require.NoError(t, err)
	assert.Len(t, e.states(t), 2)
	_, err = e.invokeAs(skel.CmdDel, "c", "1_x", conf1)
	require.NoError(t, err)
	back := pt.AttrsIn(t, e.host, "hd1")
	require.NotNil(t, back)
	assert.Equal(t, 1500, back.MTU)
	assert.Len(t, e.states(t), 1, "the other attachment's state stays")
}

func TestDelWithoutNetnsStillReleasesIPAM(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	e.add(t, conf)
	require.Len(t, e.reservations(t), 1)
	e.netns = pt.NoNetns
	_, err := e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t), "the reference returns before IPAM DEL here and leaks the address")
}

func TestDelWithTheDeviceMissingFromTheContainerSucceeds(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	e.add(t, conf)
	h := e.cont.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	require.NoError(t, h.LinkDel(l))
	_, err = e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t))
	assert.Empty(t, e.states(t))
}

func TestDelLeavesAContainerLinkItDidNotMove(t *testing.T) {
	e := newEnv(t)
	testns.Veth(t, e.cont, "eth0", nil, e.peer, "x0", nil)
	_, err := e.invoke(skel.CmdDel, e.config(t, map[string]any{"device": "hd0"}))
	require.NoError(t, err)
	assert.NotNil(t, pt.AttrsIn(t, e.cont, "eth0"), "no alias, no state: not ours")
}

func TestDelOfAnAddByTheReferenceUsesTheAlias(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	conf := e.config(t, map[string]any{"device": "hd0"})
	e.add(t, conf)
	// The reference keeps no state file, only the alias.
	require.Len(t, e.states(t), 1)
	require.NoError(t, os.Remove(filepath.Join(e.dataDir, e.states(t)[0])))
	_, err := e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	back := pt.AttrsIn(t, e.host, "hd0")
	require.NotNil(t, back)
	assert.Zero(t, back.Flags&net.FlagUp, "without state it stays down, as the reference leaves it")
}

func TestFailedAddLeavesTheDeviceWhereItWas(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1400, true)
	extra := e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24")
	extra["ipam"].(map[string]any)["routes"] = []map[string]string{{"dst": "192.168.0.0/16", "gw": "10.99.0.1"}}
	_, err := e.invoke(skel.CmdAdd, e.config(t, extra))
	require.ErrorContains(t, err, "192.168.0.0/16", "fails at the route, after the move and IPAM")
	back := pt.AttrsIn(t, e.host, "hd0")
	require.NotNil(t, back)
	assert.Equal(t, 1400, back.MTU)
	assert.NotZero(t, back.Flags&net.FlagUp)
	assert.Empty(t, back.Alias)
	assert.Equal(t, orig.HardwareAddr, back.HardwareAddr)
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Empty(t, e.reservations(t))
	assert.Empty(t, e.states(t))
}

func TestInterfaceNameTakenInTheContainerIsInvalidEnv(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	testns.Veth(t, e.cont, "eth0", nil, e.peer, "x0", nil)
	_, err := e.invoke(skel.CmdAdd, e.config(t, map[string]any{"device": "hd0"}))
	var ce *cnierror.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cnierror.CodeInvalidEnv, ce.Code)
	assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
	assert.Empty(t, e.states(t))
}

func TestBadInputNamesTheFieldAndLeavesNothing(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1500, true)
	e.fakePCI(t, "0000:00:07.0", "ixgbevf")       // bound, interface not registered yet
	e.fakePCI(t, "0000:00:08.0", "")              // bound to nothing
	e.fakePCI(t, "0000:00:09.0", "e1000e", "zz9") // its interface is not in this netns
	for _, tc := range []struct {
		name  string
		conf  map[string]any
		code  uint
		field string
	}{
		{"no selector", map[string]any{}, cnierror.CodeInvalidConfig, "specify exactly one"},
		{"two selectors", map[string]any{"device": "hd0", "pciBusID": "0000:00:07.0"}, cnierror.CodeInvalidConfig, "device, pciBusID"},
		{"selector and deviceID", map[string]any{"hwaddr": "02:00:00:00:00:01", "runtimeConfig": map[string]any{"deviceID": "0000:00:07.0"}},
			cnierror.CodeInvalidConfig, "hwaddr, runtimeConfig.deviceID"},
		{"missing device", map[string]any{"device": "nope0"}, cnierror.CodeInvalidConfig, "device"},
		{"missing device, with IPAM", e.withIPAM(map[string]any{"device": "nope0"}, "10.20.0.0/24"), cnierror.CodeInvalidConfig, "device"},
		{"bad device name", map[string]any{"device": "a/b"}, cnierror.CodeInvalidConfig, "device"},
		{"bad hwaddr", map[string]any{"hwaddr": "zz:zz"}, cnierror.CodeInvalidConfig, "hwaddr"},
		{"no device with that hwaddr", map[string]any{"hwaddr": "02:00:00:00:00:01"}, cnierror.CodeInvalidConfig, "hwaddr"},
		{"relative kernelpath", map[string]any{"kernelpath": "devices/x"}, cnierror.CodeInvalidConfig, "kernelpath"},
		{"kernelpath escaping /sys/devices", map[string]any{"kernelpath": "/sys/devices/../class/net/hd0"}, cnierror.CodeInvalidConfig, "kernelpath"},
		{"missing kernelpath", map[string]any{"kernelpath": "/sys/devices/nothing"}, cnierror.CodeInvalidConfig, "kernelpath"},
		{"malformed pciBusID", map[string]any{"pciBusID": "../../etc"}, cnierror.CodeInvalidConfig, "pciBusID"},
		{"missing PCI device", map[string]any{"pciBusID": "0000:00:1f.0"}, cnierror.CodeInvalidConfig, "pciBusID"},
		{"PCI device without a driver", map[string]any{"pciBusID": "0000:00:08.0"}, cnierror.CodeInvalidConfig, "pciBusID"},
		{"PCI interface elsewhere", map[string]any{"pciBusID": "0000:00:09.0"}, cnierror.CodeInvalidConfig, "pciBusID"},
		{"PCI interface not registered yet", map[string]any{"pciBusID": "0000:00:07.0"}, cnierror.CodeTryAgainLater, "pciBusID"},
		{"unknown deviceID", map[string]any{"runtimeConfig": map[string]any{"deviceID": "mlx5_core.sf.9"}}, cnierror.CodeInvalidConfig, "runtimeConfig.deviceID"},
		{"relative dataDir", map[string]any{"device": "hd0", "dataDir": "state"}, cnierror.CodeInvalidConfig, "dataDir"},
		{"wrong type", map[string]any{"device": 7}, cnierror.CodeInvalidConfig, "device"},
		{"loopback", map[string]any{"device": "lo"}, cnierror.CodeInvalidConfig, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.invoke(skel.CmdAdd, e.config(t, tc.conf))
			var ce *cnierror.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.code, ce.Code, ce.Msg)
			assert.Contains(t, ce.Msg, tc.field)
			assertUntouched(t, e, orig)
		})
	}
	assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
	assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
	assert.Empty(t, e.states(t))
}

func TestGCBringsHomeDevicesOfStaleAttachments(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	e.device(t, "hd1", 1420, true)
	conf0 := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	conf1 := e.config(t, e.withIPAM(map[string]any{"device": "hd1"}, "10.20.0.0/24"))
	res0 := e.add(t, conf0)
	cont2 := testns.NewWithLoopback(t)
	e.netns = cont2.Path
	_, err := e.invokeAs(skel.CmdAdd, "c2", "eth0", conf1)
	require.NoError(t, err)
	e.simulateReturn(t, cont2, "eth0")
	e.netns = ""

	gcConf := pt.WithKeys(t, conf0, map[string]any{"device": nil, "cni.dev/valid-attachments": []skel.Attachment{{ContainerID: "c1", IfName: "eth0"}}})
	_, err = e.invokeAs(skel.CmdGC, "", "", gcConf)
	require.NoError(t, err)

	back := pt.AttrsIn(t, e.host, "hd1")
	require.NotNil(t, back, "the stale attachment's returned device is renamed back")
	assert.Equal(t, 1420, back.MTU)
	assert.Equal(t, []string{"10.20.0.2"}, e.reservations(t), "c2's address released, c1's kept")
	assert.Len(t, e.states(t), 1, "c1's state kept")
	assert.Equal(t, "hd0", pt.AttrsIn(t, e.cont, "eth0").Alias)
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf0, res0))
	assert.NoError(t, err, "the valid attachment still checks")
}

func TestStatusAsksIPAM(t *testing.T) {
	e := newEnv(t)
	_, err := e.invokeAs(skel.CmdStatus, "", "", e.config(t, e.withIPAM(nil, "10.20.0.0/24")))
	assert.NoError(t, err)
	_, err = e.invokeAs(skel.CmdStatus, "", "", e.config(t, nil))
	assert.NoError(t, err, "no IPAM: nothing to ask")
}

func TestCheckFailsWhenTheDeviceIsNotWhereADDPutIt(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1500, true)
	conf := e.config(t, map[string]any{"device": "hd0"})
	res := e.add(t, conf)
	h := e.cont.Handle(t)
	l, err := h.LinkByName("eth0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}))
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
	assert.ErrorContains(t, err, "MAC")
	_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, e.config(t, map[string]any{"device": "hd9"}), res))
	assert.ErrorContains(t, err, "hd9")
}

func TestAddDelInEverySpecVersion(t *testing.T) {
	for i, v := range version.All() {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.device(t, "hd0", 1500, true)
			conf := pt.WithKeys(t, e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24")), map[string]any{"cniVersion": v})
			res, err := e.invoke(skel.CmdAdd, conf)
			require.NoError(t, err)
			assert.Equal(t, v, res.CNIVersion)
			require.NotEmpty(t, res.IPs, "version %d", i)
			if version.AtLeast(v, "0.4.0") {
				_, err = e.invoke(skel.CmdCheck, pt.WithPrev(t, conf, res))
				assert.NoError(t, err)
			}
			_, err = e.invoke(skel.CmdDel, conf)
			require.NoError(t, err)
			assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
		})
	}
}

func TestHWAddrPicksTheDeviceOverABridgeWithItsMAC(t *testing.T) {
	e := newEnv(t)
	orig := e.device(t, "hd0", 1500, true)
	h := e.host.Handle(t)
	require.NoError(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0", HardwareAddr: orig.HardwareAddr}}))
	conf := e.config(t, map[string]any{"hwaddr": orig.HardwareAddr.String()})
	e.add(t, conf)
	assert.Equal(t, "hd0", pt.AttrsIn(t, e.cont, "eth0").Alias)
	assert.NotNil(t, pt.AttrsIn(t, e.host, "br0"))

	// Two devices of the same MAC: no guess.
	e.device(t, "hd1", 1500, true)
	l, err := h.LinkByName("hd1")
	require.NoError(t, err)
	other := e.device(t, "hd2", 1500, true)
	require.NoError(t, h.LinkSetHardwareAddr(l, other.HardwareAddr))
	_, err = e.invokeAs(skel.CmdAdd, "c2", "eth1", e.config(t, map[string]any{"hwaddr": other.HardwareAddr.String()}))
	var ce *cnierror.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, cnierror.CodeInvalidConfig, ce.Code)
	assert.Contains(t, ce.Msg, "hd1, hd2")
}
