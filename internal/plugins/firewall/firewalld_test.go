package firewall_test

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/skel"
)

// privateBus starts a dbus-daemon of its own on a socket in a temp dir (never the
// system bus) and returns its address.
func privateBus(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Fatalf("dbus-daemon is needed for the firewalld tests (apt-get install dbus): %v", err)
	}
	sock := filepath.Join(t.TempDir(), "bus")
	cmd := exec.Command("dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address", "--address=unix:path="+sock)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	return strings.TrimSpace(line)
}

// fakeFirewalld plays firewalld's zone interface and records the calls it gets.
type fakeFirewalld struct {
	mu      sync.Mutex
	calls   []string
	sources map[string]string // source -> zone
}

const fwException = "org.fedoraproject.FirewallD1.Exception"

func (f *fakeFirewalld) record(format string, a ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
}

func (f *fakeFirewalld) AddSource(zone, source string) (string, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("addSource %s %s", zone, source)
	if f.sources[source] == zone {
		return "", dbus.NewError(fwException, []any{"ZONE_ALREADY_SET: " + source})
	}
	if f.sources[source] != "" {
		return "", dbus.NewError(fwException, []any{"ZONE_CONFLICT: " + source})
	}
	f.sources[source] = zone
	return zone, nil
}

func (f *fakeFirewalld) RemoveSource(zone, source string) (string, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("removeSource %s %s", zone, source)
	if f.sources[source] != zone {
		return "", dbus.NewError(fwException, []any{"UNKNOWN_SOURCE: " + source})
	}
	delete(f.sources, source)
	return zone, nil
}

func (f *fakeFirewalld) GetZoneOfSource(source string) (string, *dbus.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("getZoneOfSource %s", source)
	return f.sources[source], nil
}

func (f *fakeFirewalld) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// startFakeFirewalld exports a fake on the bus under firewalld's name.
func startFakeFirewalld(t *testing.T, addr string) *fakeFirewalld {
	t.Helper()
	conn, err := dbus.Connect(addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	f := &fakeFirewalld{sources: map[string]string{}}
	names := map[string]string{"AddSource": "addSource", "RemoveSource": "removeSource", "GetZoneOfSource": "getZoneOfSource"}
	require.NoError(t, conn.ExportWithMap(f, names, "/org/fedoraproject/FirewallD1", "org.fedoraproject.FirewallD1.zone"))
	reply, err := conn.RequestName("org.fedoraproject.FirewallD1", dbus.NameFlagDoNotQueue)
	require.NoError(t, err)
	require.Equal(t, dbus.RequestNameReplyPrimaryOwner, reply)
	return f
}

func TestFirewalldIsChosenWhenItOwnsItsName(t *testing.T) {
	e := newEnv(t)
	bus := privateBus(t)
	fake := startFakeFirewalld(t, bus)
	env := []string{"DBUS_SYSTEM_BUS_ADDRESS=" + bus}
	c := e.add(e.conflist(netOpts{name: "fwd", bridge: "br-fwd", subnets: []string{"10.30.0.0/24", "fd30::/64"}}), "c-fwd")
	var ip6 string
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			ip6 = ip.Address.Addr().String()
		}
	}
	src4, src6 := c.ip4()+"/32", ip6+"/128"
	conf := fwConf(t, "fwd", nil, c.res)

	_, err := e.invoke(skel.CmdAdd, conf, c, env...)
	require.NoError(t, err)
	assert.Equal(t, []string{"addSource trusted " + src4, "addSource trusted " + src6}, fake.Calls())
	assert.NotContains(t, e.save("iptables"), "c-fwd", "the firewalld backend adds no iptables rules")

	_, err = e.invoke(skel.CmdAdd, conf, c, env...)
	require.NoError(t, err, "ZONE_ALREADY_SET must be tolerated")
	_, err = e.invoke(skel.CmdCheck, conf, c, env...)
	require.NoError(t, err)

	_, err = e.invoke(skel.CmdDel, conf, c, env...)
	require.NoError(t, err)
	_, err = e.invoke(skel.CmdDel, conf, c, env...)
	require.NoError(t, err, "DEL twice must succeed (UNKNOWN_SOURCE tolerated)")
	calls := fake.Calls()
	assert.Equal(t, []string{"removeSource trusted " + src4, "removeSource trusted " + src6}, calls[len(calls)-4:len(calls)-2])

	_, err = e.invoke(skel.CmdCheck, conf, c, env...)
	require.Error(t, err, "CHECK must notice the sources are gone")
	assert.Contains(t, err.Error(), `want "trusted"`)
}

func TestFirewalldZoneConflictFailsAndRollsBack(t *testing.T) {
	e := newEnv(t)
	bus := privateBus(t)
	fake := startFakeFirewalld(t, bus)
	c := e.add(e.conflist(netOpts{name: "zc", bridge: "br-zc", subnets: []string{"10.31.0.0/24", "fd31::/64"}}), "c-zc")
	var ip6 string
	for _, ip := range c.res.IPs {
		if ip.Address.Addr().Is6() {
			ip6 = ip.Address.Addr().String()
		}
	}
	fake.mu.Lock()
	fake.sources[ip6+"/128"] = "public" // someone else's binding: the second add conflicts
	fake.mu.Unlock()

	conf := fwConf(t, "zc", map[string]any{"backend": "firewalld", "firewalldZone": "internal"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c, "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ZONE_CONFLICT")
	assert.Equal(t, []string{"addSource internal " + c.ip4() + "/32", "addSource internal " + ip6 + "/128",
		"removeSource internal " + c.ip4() + "/32"}, fake.Calls(), "the first source must be rolled back")
}

func TestIPTablesIsChosenWhenFirewalldIsNotRunning(t *testing.T) {
	e := newEnv(t)
	bus := privateBus(t) // a bus, but nobody owns firewalld's name
	for _, tc := range []struct{ name, addr string }{
		{"name not owned", bus},
		{"no bus socket", "unix:path=" + filepath.Join(t.TempDir(), "no-such-socket")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "c-" + strings.ReplaceAll(tc.name, " ", "-")
			c := e.add(e.conflist(netOpts{name: "auto", bridge: "br-auto", subnets: []string{"10.32.0.0/24"}}), id)
			_, err := e.invoke(skel.CmdAdd, fwConf(t, "auto", nil, c.res), c, "DBUS_SYSTEM_BUS_ADDRESS="+tc.addr)
			require.NoError(t, err)
			assert.Contains(t, e.save("iptables"), "-s "+c.ip4()+"/32 -m comment --comment \"name: \\\"auto\\\" id: \\\""+id+"\\\"\" -j ACCEPT")
		})
	}
}

func TestFirewalldBackendWithoutBusIsTryAgainLaterOnAddButDelSucceeds(t *testing.T) {
	e := newEnv(t)
	c := e.add(e.conflist(netOpts{name: "nobus", bridge: "br-nobus", subnets: []string{"10.33.0.0/24"}}), "c-nobus")
	env := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(t.TempDir(), "gone")
	conf := fwConf(t, "nobus", map[string]any{"backend": "firewalld"}, c.res)
	_, err := e.invoke(skel.CmdAdd, conf, c, env)
	require.Error(t, err)
	assert.Equal(t, uint(cnierror.CodeTryAgainLater), cnierror.Code(err))
	_, err = e.invoke(skel.CmdDel, conf, c, env)
	require.NoError(t, err, "a firewalld that is not running holds no runtime sources to remove")
}
