package hostdevice

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// These tests treat the data dir as what it is, input: an unlucky node or a hostile
// local user may leave anything under a state file's name, or write a state that names
// a host link of theirs choosing. Whatever is there, ADD, DEL and GC finish, nothing is
// read, written or deleted through a link, and no host link is changed that is not
// provably the device ADD moved.

// gcConf is conf as GC gets it, with valid as the attachments in use.
func gcConf(t *testing.T, conf []byte, valid ...skel.Attachment) []byte {
	t.Helper()
	b := pt.WithKeys(t, conf, map[string]any{"cni.dev/valid-attachments": append([]skel.Attachment{}, valid...)})
	return b
}

const outsideContent = `{"network":"hdnet","containerID":"c1","ifName":"eth0","name":"hd0","mtu":1280,"up":true}`

func TestPlantedStateEntriesAreNeverFollowed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path, outside string)
	}{
		{"FIFO", func(t *testing.T, path, _ string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }},
		{"link to /dev/zero", func(t *testing.T, path, _ string) { require.NoError(t, os.Symlink("/dev/zero", path)) }},
		{"link to a state outside", func(t *testing.T, path, outside string) { require.NoError(t, os.Symlink(outside, path)) }},
		{"huge file", func(t *testing.T, path, _ string) {
			require.NoError(t, os.WriteFile(path, []byte(outsideContent+strings.Repeat(" ", 4<<20)), 0o600))
		}},
		{"directory", func(t *testing.T, path, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(path, "sub"), 0o700))
		}},
		{"garbage", func(t *testing.T, path, _ string) { require.NoError(t, os.WriteFile(path, []byte("\x00{"), 0o600)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.device(t, "hd0", 1400, true)
			dir := testns.LinkPluginDir(t, "host-device", "host-local")
			conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
			outside := filepath.Join(t.TempDir(), "state")
			require.NoError(t, os.WriteFile(outside, []byte(outsideContent), 0o600))
			path := filepath.Join(e.dataDir, "c1:eth0.json")

			// Before ADD: replaced by the real state, never written through.
			tc.plant(t, path, outside)
			out, err := e.execPlugin(t, dir, "ADD", conf)
			require.NoError(t, err, string(out))
			fi, err := os.Lstat(path)
			require.NoError(t, err)
			assert.True(t, fi.Mode().IsRegular(), "ADD's state replaced the planted entry")

			// After ADD: DEL returns the device by its alias, as for an ADD without state.
			require.NoError(t, os.RemoveAll(path))
			tc.plant(t, path, outside)
			out, err = e.execPlugin(t, dir, "DEL", conf)
			require.NoError(t, err, string(out))
			back := pt.AttrsIn(t, e.host, "hd0")
			require.NotNil(t, back, "the device is back")
			assert.Empty(t, back.Alias)
			assert.Empty(t, e.reservations(t))
			out, err = e.execPlugin(t, dir, "GC", gcConf(t, conf))
			require.NoError(t, err, string(out))
			out, err = e.execPlugin(t, dir, "DEL", conf)
			require.NoError(t, err, "DEL again: %s", out)

			content, err := os.ReadFile(outside)
			require.NoError(t, err)
			assert.Equal(t, outsideContent, string(content), "what a link points to is left as it was")
			assert.Equal(t, 1400, pt.AttrsIn(t, e.host, "hd0").MTU, "the state outside was not read")
		})
	}
}

// TestForgedStateNeverChangesAHostLink: a state naming a host link (the issue's
// reproduction: GC of a stale "attachment" set the MAC and MTU of any host link the
// state named, brought it up and cleared its alias) changes nothing, even when that
// link's alias happens to be its own name; the forged state is dropped.
func TestForgedStateNeverChangesAHostLink(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		alias     bool
		// proof is what the forged state adds to the (a state of the release
		// before): the identity fields of a state of this one, made up.
		proof string
	}{
		{"GC", "GC", false, ""},
		{"GC, alias equal to its name", "GC", true, ""},
		{"DEL", "DEL", false, ""},
		{"DEL, alias equal to its name", "DEL", true, ""},
		{"GC, made-up index", "GC", true, `,"index":999`},
		{"GC, made-up permanent MAC", "GC", true, `,"permMAC":"02:de:ad:be:ef:02","index":999`},
		{"DEL, made-up index", "DEL", true, `,"index":999,"containerIndex":998`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			victim := e.device(t, "victim", 1500, false)
			if tc.alias {
				h := e.host.Handle(t)
				l, err := h.LinkByName("victim")
				require.NoError(t, err)
				require.NoError(t, h.LinkSetAlias(l, "victim"))
			}
			before := pt.AttrsIn(t, e.host, "victim")
			dir := testns.LinkPluginDir(t, "host-device", "host-local")
			conf := e.config(t, map[string]any{"device": "hd0"})
			cid := "ghost"
			if tc.cmd == "DEL" {
				cid = "c1" // the attachment execPlugin names
			}
			forged := `{"network":"hdnet","containerID":"` + cid + `","ifName":"eth0","name":"victim","mac":"02:de:ad:be:ef:01","mtu":1280,"up":true` + tc.proof + `}`
			require.NoError(t, os.WriteFile(filepath.Join(e.dataDir, cid+":eth0.json"), []byte(forged), 0o600))
			if tc.cmd == "GC" {
				conf = gcConf(t, conf)
			}
			out, err := e.execPlugin(t, dir, tc.cmd, conf)
			require.NoError(t, err, string(out))

			after := pt.AttrsIn(t, e.host, "victim")
			require.NotNil(t, after, "still there under its name")
			assert.Equal(t, victim.HardwareAddr, after.HardwareAddr, "MAC unchanged")
			assert.Equal(t, 1500, after.MTU)
			assert.Zero(t, after.Flags&net.FlagUp, "still down")
			assert.Equal(t, before.Alias, after.Alias)
			assert.Equal(t, before.Index, after.Index)
			assert.Empty(t, e.states(t), "the state of a virtual device nowhere to be found is dropped")
		})
	}
}

// fakePhysical gives the host interface name a bus device at devPath (below
// /sys/devices/) in the fake sysfs, as a NIC or a VF has.
func (e *env) fakePhysical(t *testing.T, name, devPath string) {
	t.Helper()
	dev := e.sys.kernelPath(devPath)
	require.NoError(t, os.MkdirAll(filepath.Join(dev, "net", name), 0o755))
	class := filepath.Join(e.sys.root, "class", "net", name)
	require.NoError(t, os.MkdirAll(class, 0o755))
	rel, err := filepath.Rel(class, dev)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(class, "device")))
}

// addThenDelWithoutNetns attaches hd0 (MTU 1400, up; a physical device when physical)
// with an address and runs a runtime's DEL without CNI_NETNS: the address goes at once,
// the device's state stays, for it may come back. It returns the config.
func (e *env) addThenDelWithoutNetns(t *testing.T, physical bool) []byte {
	t.Helper()
	e.device(t, "hd0", 1400, true)
	if physical {
		e.fakePhysical(t, "hd0", "/sys/devices/pci0000:00/0000:00:05.0")
	}
	conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0"}, "10.20.0.0/24"))
	e.add(t, conf)
	e.netns = pt.NoNetns
	_, err := e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	assert.Empty(t, e.reservations(t), "the address is released at once")
	assert.Len(t, e.states(t), 1, "the state stays while the device may come back")
	return conf
}

// TestDelWithoutNetnsKeepsAPhysicalDevicesStateUntilItIsBack: a runtime's DEL without
// CNI_NETNS while the container is still being torn down used to drop the state of a
// device still inside; the NIC came back to the host under its container name when the
// netns died and was never renamed back. The state now stays until the device is seen
// back, by a later DEL or by GC.
func TestDelWithoutNetnsKeepsAPhysicalDevicesStateUntilItIsBack(t *testing.T) {
	for _, later := range []string{"DEL", "GC"} {
		t.Run(later, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := e.addThenDelWithoutNetns(t, true)
			assert.Contains(t, e.stderr.String(), "not back in the host yet")

			e.simulateReturn(t, e.cont, "eth0")
			var err error
			if later == "GC" {
				_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf))
			} else {
				_, err = e.invoke(skel.CmdDel, conf)
			}
			require.NoError(t, err)
			e.requireHome(t, "hd0", 1400, true)
		})
	}
}

// TestDelWithoutNetnsKeepsAVirtualDevicesStateUntilItIsBack: a DEL without CNI_NETNS
// cannot tell a virtual device (a veth end, a macvlan) that died with its netns from one
// still inside a container that is being torn down, and used to drop its state as
// dead; the DEL that came later with the netns then brought the device back by its
// alias alone, down, without the up state ADD recorded. The state now stays until a
// DEL with the netns brings the device home, or GC of the attachment, with the netns
// gone, finds it gone.
func TestDelWithoutNetnsKeepsAVirtualDevicesStateUntilItIsBack(t *testing.T) {
	for _, later := range []string{"DEL", "GC"} {
		t.Run(later, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			conf := e.addThenDelWithoutNetns(t, false)
			assert.Contains(t, e.stderr.String(), "DEL came without CNI_NETNS: its state is kept")

			if later == "DEL" {
				e.netns = ""
				_, err := e.invoke(skel.CmdDel, conf)
				require.NoError(t, err)
				e.requireHome(t, "hd0", 1400, true)
				return
			}
			_, err := e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf, skel.Attachment{ContainerID: "c1", IfName: "eth0"}))
			require.NoError(t, err)
			assert.Len(t, e.states(t), 1, "a valid attachment's state stays")
			e.cont.Close() // the veth dies with it
			_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf))
			require.NoError(t, err)
			assert.Empty(t, e.states(t))
			assert.Contains(t, e.stderr.String(), "hd0 (eth0 of container c1) is gone")
		})
	}
}

// TestGCDropsTheStateOfAnUnpluggedDevice: the state of a physical device that is
// neither back nor present any more (hot-unplugged) is dropped by GC.
func TestGCDropsTheStateOfAnUnpluggedDevice(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true)
	e.fakePhysical(t, "hd0", "/sys/devices/pci0000:00/0000:00:05.0")
	conf := e.config(t, map[string]any{"device": "hd0"})
	e.add(t, conf)
	e.netns = pt.NoNetns
	_, err := e.invoke(skel.CmdDel, conf)
	require.NoError(t, err)
	require.Len(t, e.states(t), 1)
	_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf, skel.Attachment{ContainerID: "c1", IfName: "eth0"}))
	require.NoError(t, err)
	assert.Len(t, e.states(t), 1, "a valid attachment's state stays")

	require.NoError(t, os.RemoveAll(filepath.Join(e.sys.root, "devices")))
	_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf))
	require.NoError(t, err)
	assert.Empty(t, e.states(t))
	assert.Contains(t, e.stderr.String(), "is gone")
}

// TestDataDirThatIsAFileIsAConfigError: ADD names dataDir (code 7, not the 999 of a
// failed mkdir) and leaves the device where it was; DEL, GC find no state there and
// succeed.
func TestDataDirThatIsAFileIsAConfigError(t *testing.T) {
	e := newEnv(t)
	e.device(t, "hd0", 1400, true)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, dataDir := range []string{file, filepath.Join(file, "sub")} {
		conf := e.config(t, e.withIPAM(map[string]any{"device": "hd0", "dataDir": dataDir}, "10.20.0.0/24"))
		_, err := e.invoke(skel.CmdAdd, conf)
		var ce *cnierror.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, cnierror.CodeInvalidConfig, ce.Code, ce.Msg)
		assert.Contains(t, ce.Msg, "dataDir")
		assert.NotNil(t, pt.AttrsIn(t, e.host, "hd0"))
		assert.Equal(t, []string{"lo"}, pt.Links(t, e.cont))
		assert.Empty(t, e.reservations(t))
		for _, cmd := range []string{skel.CmdDel, skel.CmdDel} {
			_, err = e.invoke(cmd, conf)
			require.NoError(t, err)
		}
		_, err = e.invokeAs(skel.CmdGC, "", "", gcConf(t, conf))
		require.NoError(t, err)
	}
}

// TestDelReadsOnlyTheDataDir: DEL needs the data dir alone to find its state. Keys it
// does not need never make it fail (the device comes home with what ADD took from it,
// whatever the selector says now), and a data dir ADD refuses holds no state: DEL
// succeeds and returns the device by its alias alone, as after an ADD by the reference.
func TestDelReadsOnlyTheDataDir(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct {
		name     string
		keys     map[string]any
		restores bool
	}{
		{"device names nothing", map[string]any{"device": "nope0"}, true},
		{"device not a string", map[string]any{"device": 7}, true},
		{"two selectors", map[string]any{"device": "hd0", "hwaddr": "02:00:00:00:00:01"}, true},
		{"malformed pciBusID", map[string]any{"device": nil, "pciBusID": "../../etc"}, true},
		{"no selector", map[string]any{"device": nil}, true},
		{"dataDir relative", map[string]any{"dataDir": "state"}, false},
		{"dataDir a file", map[string]any{"dataDir": file}, false},
		{"dataDir not a string", map[string]any{"dataDir": 7}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.device(t, "hd0", 1400, true)
			keys := map[string]any{"device": "hd0"}
			good := e.config(t, e.withIPAM(keys, "10.20.0.0/24"))
			for k, v := range tc.keys {
				keys[k] = v
			}
			bad := e.config(t, e.withIPAM(keys, "10.20.0.0/24"))
			_, err := e.invoke(skel.CmdAdd, bad)
			require.Error(t, err, "premise: ADD refuses it")
			e.add(t, good)
			h := e.cont.Handle(t)
			l, err := h.LinkByName("eth0")
			require.NoError(t, err)
			require.NoError(t, h.LinkSetMTU(l, 1300))

			for i := range 2 {
				_, err = e.invoke(skel.CmdDel, bad)
				require.NoError(t, err, "DEL %d", i+1)
			}
			back := pt.AttrsIn(t, e.host, "hd0")
			require.NotNil(t, back, "the device is home")
			assert.Empty(t, back.Alias)
			assert.Empty(t, e.reservations(t))
			if tc.restores {
				assert.Equal(t, 1400, back.MTU, "its state was found and put back")
				assert.Empty(t, e.states(t))
			}
		})
	}
}

// TestStateOfTheReleaseBeforeStillBringsTheDeviceHome: a node upgraded under running
// pods holds states written before the permanent MAC and indexes were recorded; their
// devices still come home, by the alias, with what ADD took from them.
func TestStateOfTheReleaseBeforeStillBringsTheDeviceHome(t *testing.T) {
	for _, netns := range []string{"alive", "gone, device returned"} {
		t.Run(netns, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.device(t, "hd0", 1400, true)
			conf := e.config(t, map[string]any{"device": "hd0"})
			e.add(t, conf)
			// What the release before wrote.
			old := `{"network":"hdnet","containerID":"c1","ifName":"eth0","name":"hd0","mtu":1400,"up":true}`
			require.NoError(t, os.WriteFile(filepath.Join(e.dataDir, "c1:eth0.json"), []byte(old), 0o600))
			if netns != "alive" {
				e.simulateReturn(t, e.cont, "eth0")
				e.netns = filepath.Join(t.TempDir(), "gone")
			}
			_, err := e.invoke(skel.CmdDel, conf)
			require.NoError(t, err)
			e.requireHome(t, "hd0", 1400, true)
		})
	}
}
