package firewall_test

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/godbus/dbus/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/plugins/firewall"
	"github.com/cnikit/cni/internal/skel"
)

// fakeFirewalld plays firewalld's zone interface and records the calls it gets.
type fakeFirewalld struct {
	mu      sync.Mutex
	calls   []string
	sources map[string]string // source -> zone
}

// fwError is a firewalld exception: its message starts with the error code.
func fwError(code, source string) *dbus.Error {
	return dbus.NewError("org.fedoraproject.FirewallD1.Exception", []any{code + ": " + source})
}

// record notes a call and locks f until the returned function runs.
func (f *fakeFirewalld) record(format string, a ...any) (unlock func()) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, a...))
	return f.mu.Unlock
}

func (f *fakeFirewalld) addSource(zone, source string) (string, *dbus.Error) {
	defer f.record("addSource %s %s", zone, source)()
	if f.sources[source] == zone {
		return "", fwError("ZONE_ALREADY_SET", source)
	}
	if f.sources[source] != "" {
		return "", fwError("ZONE_CONFLICT", source)
	}
	f.sources[source] = zone
	return zone, nil
}

func (f *fakeFirewalld) removeSource(zone, source string) (string, *dbus.Error) {
	defer f.record("removeSource %s %s", zone, source)()
	if f.sources[source] != zone {
		return "", fwError("UNKNOWN_SOURCE", source)
	}
	delete(f.sources, source)
	return zone, nil
}

func (f *fakeFirewalld) getZoneOfSource(source string) (string, *dbus.Error) {
	defer f.record("getZoneOfSource %s", source)()
	return f.sources[source], nil
}

func (f *fakeFirewalld) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// startFakeFirewalld serves a fake under firewalld's name, path and zone interface on
// the bus: a call anywhere else gets the bus's or godbus's own error, and arguments
// that are not strings an InvalidArgs error.
func startFakeFirewalld(t *testing.T, addr string) *fakeFirewalld {
	t.Helper()
	f := &fakeFirewalld{sources: map[string]string{}}
	firewall.ServeOnBus(t, addr, "org.fedoraproject.FirewallD1", "/org/fedoraproject/FirewallD1",
		"org.fedoraproject.FirewallD1.zone", map[string]any{
			"addSource":       f.addSource,
			"removeSource":    f.removeSource,
			"getZoneOfSource": f.getZoneOfSource,
		})
	return f
}

func TestFirewalldIsChosenWhenItOwnsItsName(t *testing.T) {
	e := newEnv(t)
	bus := firewall.StartPrivateBus(t)
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
	bus := firewall.StartPrivateBus(t)
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
	bus := firewall.StartPrivateBus(t) // a bus, but nobody owns firewalld's name
	for _, tc := range []struct{ name, addr string }{
		{"name not owned", bus},
		{"no bus socket", "unix:path=" + filepath.Join(t.TempDir(), "no-such-socket")},
		{"bus says nothing", silentBus(t)}, // given up after detectTimeout
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

// silentBus listens on a unix socket, accepts, and never answers: a wedged bus.
func silentBus(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "silent")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return "unix:path=" + sock
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
