package tuning

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// fixture is a container joined to a host by a veth, a data dir and the prevResult a
// main plugin would have returned.
type fixture struct {
	host, cont *testns.NS
	dataDir    string
	prev       string
	ifName     string
}

func setup(t testing.TB) *fixture { return setupIf(t, "eth0") }

// setupIf is setup with the container interface called ifName.
func setupIf(t testing.TB, ifName string) *fixture {
	t.Helper()
	testns.RequireRoot(t)
	f := &fixture{host: testns.New(t), cont: testns.New(t), dataDir: t.TempDir(), ifName: ifName}
	hl, err := link.Open(f.host.Path)
	require.NoError(t, err)
	defer hl.Close()
	cl, err := link.Open(f.cont.Path)
	require.NoError(t, err)
	defer cl.Close()
	v, err := link.CreateVeth(hl, cl, link.VethOptions{IfName: ifName, ContainerUp: true})
	require.NoError(t, err)
	f.prev = fmt.Sprintf(`{"cniVersion":"1.0.0","interfaces":[{"name":%q,"mac":"02:00:00:00:00:01"},`+
		`{"name":%q,"mac":%q,"sandbox":%q}],"ips":[{"interface":1,"address":"10.9.0.2/24"}]}`,
		v.Host.Attrs().Name, ifName, v.Container.Attrs().HardwareAddr, f.cont.Path)
	return f
}

// conf builds a config from extra top-level keys, with the fixture's data dir and
// prevResult.
func (f *fixture) conf(keys string) []byte {
	s := `{"cniVersion":"1.0.0","name":"tune","type":"tuning","dataDir":"` + f.dataDir + `","prevResult":` + f.prev
	if keys != "" {
		s += "," + keys
	}
	return []byte(s + "}")
}

func (f *fixture) invoke(t testing.TB, p *skel.Plugin, cmd string, config []byte) (*result.Result, error) {
	t.Helper()
	return pt.InvokeLogged(t, f.host, p, pt.Call{Command: cmd, ContainerID: "ctr1", Netns: f.cont.Path, IfName: "eth0",
		Config: config}, nil)
}

// state is what the test reads back from the kernel.
type state struct {
	mac                        string
	mtu, txqlen                int
	promisc, allmulti          bool
	arpIgnore, somaxconn, ping string
}

func (f *fixture) read(t testing.TB) state {
	t.Helper()
	var s state
	f.cont.Run(t, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		a := l.Attrs()
		s.mac, s.mtu, s.txqlen = a.HardwareAddr.String(), a.MTU, a.TxQLen
		s.promisc, s.allmulti = a.RawFlags&syscall.IFF_PROMISC != 0, a.RawFlags&syscall.IFF_ALLMULTI != 0
		for name, dst := range map[string]*string{
			"net/ipv4/conf/eth0/arp_ignore": &s.arpIgnore,
			"net/core/somaxconn":            &s.somaxconn,
			"net/ipv4/ping_group_range":     &s.ping,
		} {
			if *dst, err = sysctl.Get(name); err != nil {
				return err
			}
		}
		return nil
	})
	return s
}

const everyKey = `"mac":"0a:58:0a:09:00:42","mtu":1400,"promisc":true,"allmulti":true,"txQLen":321,
	"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net.core.somaxconn":"1234","net.ipv4.ping_group_range":"7 9"}`

func TestAddAppliesEveryKeyAndDelRestoresThem(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent-allowlist.conf"))
	before := f.read(t)
	require.NotEqual(t, "1234", before.somaxconn, "premise: the test changes the value")

	res, err := f.invoke(t, p, "ADD", f.conf(everyKey))
	require.NoError(t, err)
	after := f.read(t)
	assert.Equal(t, state{mac: "0a:58:0a:09:00:42", mtu: 1400, txqlen: 321, promisc: true, allmulti: true,
		arpIgnore: "1", somaxconn: "1234", ping: "7\t9"}, after)
	require.Len(t, res.Interfaces, 2)
	assert.Equal(t, "0a:58:0a:09:00:42", res.Interfaces[1].Mac, "result carries the new MAC")
	assert.Equal(t, "02:00:00:00:00:01", res.Interfaces[0].Mac, "host interface untouched")
	backup := f.backup()
	assert.FileExists(t, backup)

	_, err = f.invoke(t, p, "CHECK", f.conf(everyKey))
	assert.NoError(t, err)

	_, err = f.invoke(t, p, "DEL", f.conf(everyKey))
	require.NoError(t, err)
	assert.Equal(t, before, f.read(t), "every value restored, sysctls included")
	assert.NoFileExists(t, backup)
	_, err = f.invoke(t, p, "DEL", f.conf(everyKey))
	assert.NoError(t, err, "second DEL")
	assert.Equal(t, before, f.read(t), "the second DEL restores nothing twice")
	_, err = f.invoke(t, p, "CHECK", f.conf(everyKey))
	assert.Error(t, err, "CHECK after DEL: the values are the original ones again")
}

func TestSecondAddKeepsTheOriginalValuesForDel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	before := f.read(t)
	_, err := f.invoke(t, p, "ADD", f.conf(`"mtu":1400,"sysctl":{"net.core.somaxconn":"1234"}`))
	require.NoError(t, err)
	_, err = f.invoke(t, p, "ADD", f.conf(`"mtu":1300,"txQLen":77,"sysctl":{"net.core.somaxconn":"99"}`))
	require.NoError(t, err)
	assert.Equal(t, 1300, f.read(t).mtu)
	_, err = f.invoke(t, p, "DEL", f.conf(""))
	require.NoError(t, err)
	assert.Equal(t, before, f.read(t))
	assert.NoFileExists(t, f.backup(), "DEL drops the backup")
}

func TestCheckFailsAfterAValueWasChangedByHand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, want string
		change     func() error
	}{
		{"mtu", "mtu", func() error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			return netlink.LinkSetMTU(l, 1500)
		}},
		{"promisc", "promisc", func() error {
			l, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			return netlink.SetPromiscOff(l)
		}},
		{"sysctl", "net/core/somaxconn", func() error { return sysctl.Set("net/core/somaxconn", "55") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			p := New(filepath.Join(t.TempDir(), "absent"))
			c := f.conf(everyKey)
			_, err := f.invoke(t, p, "ADD", c)
			require.NoError(t, err)
			f.cont.Run(t, tt.change)
			_, err = f.invoke(t, p, "CHECK", c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestAllowListRefusesASysctlItDoesNotList(t *testing.T) {
	t.Parallel()
	f := setup(t)
	allow := filepath.Join(t.TempDir(), "allowlist.conf")
	require.NoError(t, os.WriteFile(allow, []byte("# node policy\n^net\\.ipv4\\.conf\\.IFNAME\\.arp_ignore$\n\n"), 0o600))
	p := New(allow)
	before := f.read(t)

	_, err := f.invoke(t, p, "ADD", f.conf(`"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net.core.somaxconn":"1234"}`))
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, `"net.core.somaxconn"`)
	assert.Equal(t, before, f.read(t), "nothing applied")
	assert.NoFileExists(t, f.backup())

	_, err = f.invoke(t, p, "ADD", f.conf(`"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1"}`))
	require.NoError(t, err)
	assert.Equal(t, "1", f.read(t).arpIgnore)
}

func TestAllowListThatIsNoRegularFileFailsFast(t *testing.T) {
	t.Parallel()
	f := setup(t)
	fifo := filepath.Join(t.TempDir(), "allowlist.conf")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	before := f.read(t)
	for _, path := range []string{fifo, "/dev/zero"} {
		_, err := f.invoke(t, New(path), "ADD", f.conf(`"sysctl":{"net.core.somaxconn":"1234"}`))
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), "allow-list", path)
		assert.Equal(t, before, f.read(t), "nothing applied: %s", path)
		assert.NoFileExists(t, f.backup(), path)
	}
}

func TestPathEscapesAreRefusedAndNothingIsWritten(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	before := f.read(t)
	for _, key := range []string{"net.ipv4/../../kernel/hostname", "/proc/sys/kernel/hostname", "../kernel/hostname"} {
		_, err := f.invoke(t, p, "ADD", f.conf(`"mtu":1400,"sysctl":{"`+key+`":"pwned"}`))
		require.Error(t, err, key)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), key)
		assert.Contains(t, err.Error(), key)
		assert.Equal(t, before, f.read(t), "not even the mtu applied: %s", key)
		assert.NoFileExists(t, f.backup(), key)
	}
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.NotEqual(t, "pwned", host)
}

func TestFailedAddRestoresWhatItChanged(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	before := f.read(t)
	// net/core/somaxconn is written first (sorted), then the bogus value fails.
	_, err := f.invoke(t, p, "ADD", f.conf(`"mtu":1400,"sysctl":{"net.core.somaxconn":"1234","net.ipv4.conf.IFNAME.arp_ignore":"bogus"}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "arp_ignore")
	assert.Equal(t, before, f.read(t))
	assert.NoFileExists(t, f.backup())
}

func TestAddErrorsAreTyped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	before := f.read(t)
	noPrev := []byte(`{"cniVersion":"1.0.0","name":"tune","type":"tuning","mtu":1400}`)
	_, err := f.invoke(t, p, "ADD", noPrev)
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "prevResult")
	assert.Equal(t, before, f.read(t), "nothing applied without a prevResult")

	_, err = f.invoke(t, p, "ADD", f.conf(`"mtu":1400,"sysctl":{"net.ipv4.conf.IFNAME.no_such_knob":"1"}`))
	pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "no_such_knob")
	assert.Equal(t, before, f.read(t), "the mtu is restored after the unknown sysctl")
	assert.NoFileExists(t, f.backup())
}

func TestDelWithoutNetnsDropsTheBackup(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	_, err := f.invoke(t, p, "ADD", f.conf(`"mtu":1400`))
	require.NoError(t, err)
	f.cont.Close()
	_, err = f.invoke(t, p, "DEL", f.conf(""))
	require.NoError(t, err)
	assert.NoFileExists(t, f.backup())
	_, err = f.invoke(t, p, "DEL", f.conf(""))
	assert.NoError(t, err, "DEL again, the backup and the netns gone")
}

func TestMacFromCNIArgsReachesTheKernel(t *testing.T) {
	t.Parallel()
	f := setup(t)
	p := New(filepath.Join(t.TempDir(), "absent"))
	var res *result.Result
	var err error
	args := skel.Args{Command: "ADD", ContainerID: "ctr1", Netns: f.cont.Path, IfName: "eth0",
		CNIArgs: "IgnoreUnknown=1;MAC=0a:58:00:00:00:07", Path: []string{"/x"}}
	require.NoError(t, f.host.Do(func() error {
		res, err = skel.Invoke(context.Background(), p, args, f.conf(`"capabilities":{"mac":true}`), nil)
		return nil
	}))
	require.NoError(t, err)
	assert.Equal(t, "0a:58:00:00:00:07", f.read(t).mac)
	assert.Equal(t, "0a:58:00:00:00:07", res.Interfaces[1].Mac)
	mac, _ := net.ParseMAC("0a:58:00:00:00:07")
	assert.Equal(t, mac.String(), strings.ToLower(res.Interfaces[1].Mac))
}

// BenchmarkAddDel measures an in-process ADD plus DEL that sets every key and restores
// it, and reports the medians.
func BenchmarkAddDel(b *testing.B) {
	f := setup(b)
	p := New(filepath.Join(b.TempDir(), "absent"))
	c := f.conf(everyKey)
	var adds, dels []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := f.invoke(b, p, "ADD", c); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := f.invoke(b, p, "DEL", c); err != nil {
			b.Fatal(err)
		}
		adds, dels = append(adds, mid.Sub(start)), append(dels, time.Since(mid))
	}
	b.ReportMetric(timing.MedianMs(adds), "add-ms")
	b.ReportMetric(timing.MedianMs(dels), "del-ms")
}
