package cli_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/firewall/firewalldtest"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The test's "outside": a client namespace routed to the host, as another machine of
// the node's network is.
const (
	outsideHost = "10.99.0.1" // the host's address towards it
	outsideAddr = "10.99.0.2"
	podAddr     = "10.77.0.2"
	// repairBound is the deadline within which `cni repair --watch` must have put a
	// reload's damage right: the quiet period (1 s by default, 200 ms here) and one pass.
	repairBound = 10 * time.Second
)

// debianNftablesConf is Debian's /etc/nftables.conf: what `systemctl restart nftables`
// loads, starting with `flush ruleset`.
const debianNftablesConf = `flush ruleset

table inet filter {
	chain input {
		type filter hook input priority filter;
	}
	chain forward {
		type filter hook forward priority filter;
	}
	chain output {
		type filter hook output priority filter;
	}
}
`

// hostIPTablesRules is a host's saved iptables ruleset as iptables.service or
// netfilter-persistent loads it on a restart: every table it names is flushed first.
const hostIPTablesRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
`

// repairChain is the standard chain (bridge with masquerade, portmap, bandwidth) with
// the firewall plugin, every rule in backend ("firewalld" puts the firewall's accepts
// into firewalld's zones and the other rules into nftables).
func repairChain(dataDir, backend string) string {
	rules := backend
	if backend == "firewalld" {
		rules = "nftables"
	}
	return `{"cniVersion":"1.1.0","name":"std","plugins":[` +
		`{"type":"bridge","bridge":"cni-std0","isGateway":true,"ipMasq":true,"ipMasqBackend":"` + rules + `",` +
		`"ipam":{"type":"host-local","dataDir":"` + dataDir + `","ranges":[[{"subnet":"10.77.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},` +
		`{"type":"firewall","backend":"` + backend + `"},` +
		`{"type":"portmap","backend":"` + rules + `","capabilities":{"portMappings":true}},` +
		`{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
}

// pod is one attachment of the repair chain with an outside to reach and be reached from.
type pod struct {
	e       *env
	ctr     *testns.NS
	outside *testns.NS
}

// newPod adds a pod to the repair chain in backend: it serves "container" on port 80
// (mapped from the host's 8080), and the outside answers on 9000 with the address a
// connection came from.
func newPod(t *testing.T, backend string, extraEnv ...string) *pod {
	e := newEnv(t)
	e.extra = extraEnv
	e.conf(t, "10-std.conflist", repairChain(t.TempDir(), backend))
	p := &pod{e: e, ctr: testns.NewWithLoopback(t), outside: testns.NewWithLoopback(t)}
	testns.Veth(t, e.host, "voutside", []string{outsideHost + "/24"}, p.outside, "vhost", []string{outsideAddr + "/24"})
	testns.DefaultRoutes(t, p.outside, "vhost", outsideHost)
	testns.ServeTCP(t, p.ctr, "tcp4", ":80", "container")
	testns.ServeTCPWith(t, p.outside, "tcp4", ":9000", func(remote net.Addr) string {
		return remote.(*net.TCPAddr).IP.String()
	})
	r := p.cni(t, "add")
	require.Equal(t, 0, r.code, r.stderr)
	p.requireWorks(t)
	return p
}

func (p *pod) cni(t *testing.T, cmd string) run {
	t.Helper()
	return p.e.cni(t, "", cmd, "std", p.ctr.Path, "--cap-args", standardCaps)
}

// works says what of the pod's network answers: the port mapping from outside, and
// the masquerade of the pod's connections out (the outside sees the host's address).
func (p *pod) works() error {
	got, err := testns.DialTCP(p.outside, net.JoinHostPort(outsideHost, "8080"), time.Second)
	if err != nil || got != "container" {
		return fmt.Errorf("port mapping: got %q, %v", got, err)
	}
	got, err = testns.DialTCP(p.ctr, net.JoinHostPort(outsideAddr, "9000"), time.Second)
	if err != nil || got != outsideHost {
		return fmt.Errorf("masquerade: the outside sees %q (%v), want the host's %s", got, err, outsideHost)
	}
	return nil
}

func (p *pod) requireWorks(t *testing.T) {
	t.Helper()
	// A first SYN lost on a loaded machine is retransmitted after a second, past works'
	// own timeout: a few tries before calling the pod broken.
	err := p.works()
	for try := 0; err != nil && try < 3; try++ {
		err = p.works()
	}
	require.NoError(t, err)
	r := p.cni(t, "check")
	require.Equal(t, run{}, r, "CHECK passes")
	r = p.e.cni(t, "", "status", "std")
	require.Equal(t, run{}, r, "STATUS is ready")
}

// requireBroken checks that the damage is seen: CHECK fails, STATUS is code 51 naming
// each missing object, and the network does not work.
func (p *pod) requireBroken(t *testing.T, missing ...string) {
	t.Helper()
	r := p.cni(t, "check")
	assert.Equal(t, 1, r.code, "CHECK fails: %s", r.stderr)
	r = p.e.cni(t, "", "status", "std")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "(CNI error code 51)")
	assert.Contains(t, r.stderr, "`cni repair` puts them back")
	for _, m := range missing {
		assert.Contains(t, r.stderr, m, "STATUS names what is missing")
	}
}

// reloads are the ways a host's firewall comes back empty of the pods' rules.
var reloads = []struct {
	name string
	do   func(t *testing.T, host *testns.NS)
}{
	{"nft flush ruleset", flushRuleset},
	{"systemctl restart nftables", func(t *testing.T, host *testns.NS) {
		testns.RequireFirewallBinaries(t, "nft loads the host's ruleset")
		out, err := host.ExecInput(t, debianNftablesConf, "nft", "-f", "-")
		require.NoError(t, err, out)
	}},
}

// flushRuleset is `nft flush ruleset` in the host namespace, sent over netlink as nft
// sends it (a table deletion without a name, in every family), so that it runs where
// the firewall binaries are hidden too.
func flushRuleset(t *testing.T, host *testns.NS) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		c.FlushRuleset()
		return c.Flush()
	})
}

// TestRepairPutsBackWhatAHostFirewallReloadRemoved: with a pod up on the standard chain
// and the firewall plugin, in either backend, `nft flush ruleset` or a restart of
// nftables.service (Debian's config) takes its masquerade, port mapping and firewall
// accepts; CHECK fails, STATUS says 51 naming each, the mapping and masquerade stop
// working; `cni repair` puts them back (one "repaired" line naming them) with no new
// ADD, after which CHECK and STATUS pass, both work again, and a second repair says
// "ok" and changes nothing. Before `cni repair`, the pod stayed broken until re-created
// and STATUS said nothing.
func TestRepairPutsBackWhatAHostFirewallReloadRemoved(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		cases := reloads
		if backend == "iptables" {
			cases = append(cases[:1:1], struct {
				name string
				do   func(t *testing.T, host *testns.NS)
			}{"iptables-restore of the host's rules", func(t *testing.T, host *testns.NS) {
				for _, tool := range []string{"iptables-restore", "ip6tables-restore"} {
					out, err := host.ExecInput(t, hostIPTablesRules, tool)
					require.NoError(t, err, out)
				}
			}})
		}
		for _, reload := range cases {
			t.Run(reload.name, func(t *testing.T) {
				p := newPod(t, backend)
				reload.do(t, p.e.host)
				p.requireBroken(t, "ipMasq: ", "portMappings: ", "firewall: ")
				assert.Error(t, p.works())

				r := p.e.cni(t, "", "repair")
				require.Equal(t, 0, r.code, r.stderr)
				assert.Regexp(t, `^repaired std cnitool-[0-9a-f]+ eth0: bridge: ipMasq: .*; firewall: firewall check.*; portmap: portMappings: .*\n$`, r.stdout)
				p.requireWorks(t)
				before := p.e.ruleset(t)

				r = p.e.cni(t, "", "repair")
				require.Equal(t, 0, r.code, r.stderr)
				assert.Regexp(t, `^ok std cnitool-[0-9a-f]+ eth0\n$`, r.stdout)
				assert.Equal(t, before, p.e.ruleset(t), "a repair of an intact pod changes nothing")
				assert.Equal(t, run{}, p.cni(t, "del"))
			})
		}
	})
}

// TestRepairPutsBackBandwidthsRedirect: the host veth's ingress qdisc, which redirects
// the pod's traffic to its ifb for the egress limit, deleted by hand (`tc qdisc del
// dev <veth> ingress`): STATUS names it, repair adds it back without a new link, and
// CHECK passes.
func TestRepairPutsBackBandwidthsRedirect(t *testing.T) {
	p := newPod(t, "nftables")
	h := p.e.host.Handle(t)
	veth := hostVeth(t, h)
	require.NoError(t, h.QdiscDel(&netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: veth.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}))
	linksBefore, err := h.LinkList()
	require.NoError(t, err)
	p.requireBroken(t, "bandwidth: egress: "+veth.Attrs().Name+": no ingress filter redirects to bwp")

	r := p.e.cni(t, "", "repair")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^repaired std cnitool-[0-9a-f]+ eth0: bandwidth: egress: .*\n$`, r.stdout)
	p.requireWorks(t)
	linksAfter, err := h.LinkList()
	require.NoError(t, err)
	assert.Len(t, linksAfter, len(linksBefore), "repair makes no link")
	assert.Equal(t, run{}, p.cni(t, "del"))
}

// hostVeth is the one veth of the host's bridge cni-std0.
func hostVeth(t *testing.T, h *netlink.Handle) netlink.Link {
	br, err := h.LinkByName("cni-std0")
	require.NoError(t, err)
	links, err := h.LinkList()
	require.NoError(t, err)
	for _, l := range links {
		if l.Type() == "veth" && l.Attrs().MasterIndex == br.Attrs().Index {
			return l
		}
	}
	t.Fatal("no veth on cni-std0")
	return nil
}

// watcher is `cni repair --watch` running in the test's host namespace.
type watcher struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (w *watcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(b)
}

func (w *watcher) output() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.String()
}

// startWatcher starts the watcher and waits for its first pass; the test's end stops it
// with SIGTERM, after which it must exit 0.
func startWatcher(t *testing.T, e *env, args ...string) *watcher {
	w := &watcher{}
	w.cmd = exec.Command(e.bin, append([]string{"repair", "--watch", "--quiet", "200ms"}, args...)...)
	w.cmd.Env = append(append(os.Environ(), "NETCONFPATH="+e.confDir, "CNI_PATH="+e.pluginDir, "CNI_CACHE_DIR="+e.cacheDir), e.extra...)
	w.cmd.Stdout, w.cmd.Stderr = w, w
	e.host.Run(t, w.cmd.Start)
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			assert.NoError(t, err, "the watcher exits 0 on SIGTERM: %s", w.output())
		case <-time.After(repairBound):
			_ = w.cmd.Process.Kill()
			t.Errorf("the watcher did not stop within %v of SIGTERM: %s", repairBound, w.output())
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(w.output(), "ok std ") }, repairBound, 50*time.Millisecond,
		"the first pass: %s", w.output())
	return w
}

// repairs counts the repairs the watcher reported so far.
func (w *watcher) repairs() int { return strings.Count(w.output(), "repaired std ") }

// requireRepairedWithin waits for the pod to pass CHECK and work again, the watcher
// having reported more repairs than the given count from before the damage.
func (p *pod) requireRepairedWithin(t *testing.T, w *watcher, repairs int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		err := p.works()
		if err == nil && p.cni(t, "check").code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not repaired within %v: %v; watcher: %s", bound, err, w.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return strings.Count(w.output(), "repaired std ") > repairs }, bound, 50*time.Millisecond,
		"the watcher reports the repair: %s", w.output())
}

// TestRepairWatchRepairsAfterEveryReload: `cni repair --watch` (the DaemonSet's idle
// container) sees `nft flush ruleset` and a restart of nftables.service through
// nftables' netlink notifications and has the pod working and passing CHECK again
// within repairBound each time, with no new ADD, in either backend.
func TestRepairWatchRepairsAfterEveryReload(t *testing.T) {
	pt.ForEachBackend(t, func(t *testing.T, backend string) {
		p := newPod(t, backend)
		w := startWatcher(t, p.e, "--poll", "0")
		for _, reload := range reloads {
			if testns.FirewallBinariesHidden() && reload.name != "nft flush ruleset" {
				continue // it needs nft
			}
			before := w.repairs()
			reload.do(t, p.e.host)
			p.requireRepairedWithin(t, w, before, repairBound)
		}
		assert.Equal(t, run{}, p.cni(t, "del"))
	})
}

// TestRepairAfterAFirewalldReload: with the firewall's accepts in firewalld (a fake
// firewalld on a bus of the test's own: no real firewalld here), a reload drops the
// pod's zone source and sends firewalld's Reloaded signal; STATUS names the source, `cni
// repair` binds it again, and `cni repair --watch` does so on the signal alone, within
// repairBound.
func TestRepairAfterAFirewalldReload(t *testing.T) {
	bus := firewalldtest.StartPrivateBus(t)
	fw := firewalldtest.Start(t, bus)
	p := newPod(t, "firewalld", "DBUS_SYSTEM_BUS_ADDRESS="+bus)
	src := podAddr + "/32"
	require.Equal(t, map[string]string{src: "trusted"}, fw.Sources())

	require.NoError(t, fw.Reload())
	assert.Empty(t, fw.Sources())
	p.requireBroken(t, `firewall: firewalld: source `+src+` is in zone "", want "trusted"`)
	r := p.e.cni(t, "", "repair")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^repaired std cnitool-[0-9a-f]+ eth0: firewall: firewalld: source `+src+`.*\n$`, r.stdout)
	assert.Equal(t, map[string]string{src: "trusted"}, fw.Sources())
	p.requireWorks(t)

	w := startWatcher(t, p.e, "--poll", "0", "--system-bus", bus)
	before := w.repairs()
	require.NoError(t, fw.Reload())
	require.Eventually(t, func() bool { return fw.Sources()[src] == "trusted" }, repairBound, 50*time.Millisecond,
		"the watcher binds the source again: %s", w.output())
	p.requireRepairedWithin(t, w, before, repairBound)
	assert.Equal(t, run{}, p.cni(t, "del"))
}

// keepRulesInIPTablesNFT makes the host's firewall one kept in iptables-nft: `table ip
// filter { chain FORWARD { type filter hook forward priority filter; policy drop; } }`,
// as iptables-nft makes it, which the backend rule reads as "the host keeps its rules
// in iptables".
func keepRulesInIPTablesNFT(t *testing.T, host *testns.NS) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"})
		drop := nftables.ChainPolicyDrop
		c.AddChain(&nftables.Chain{Name: "FORWARD", Table: table, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &drop})
		return c.Flush()
	})
}

// TestRepairWithoutIPTablesToolsOnAnIPTablesNodeRefuses: a process without the iptables
// tools (the DaemonSet's container, whose image has none) on a node that keeps its rules
// in iptables would put back in nftables what the host's plugins put in iptables: `cni
// repair` fails saying so and changes nothing, `cni repair --watch` says so and idles
// until SIGTERM, exiting 0 (the DaemonSet stays Ready).
func TestRepairWithoutIPTablesToolsOnAnIPTablesNodeRefuses(t *testing.T) {
	e := newEnv(t)
	keepRulesInIPTablesNFT(t, e.host)
	e.extra = []string{"PATH=" + t.TempDir()}
	before := e.ruleset(t)
	r := e.cni(t, "", "repair")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cni repair: this node keeps its rules in iptables, and this process has no iptables tools in PATH")
	assert.Equal(t, before, e.ruleset(t))

	w := &watcher{}
	w.cmd = exec.Command(e.bin, "repair", "--watch")
	w.cmd.Env = append(append(os.Environ(), "NETCONFPATH="+e.confDir, "CNI_CACHE_DIR="+e.cacheDir), e.extra...)
	w.cmd.Stdout, w.cmd.Stderr = w, w
	e.host.Run(t, w.cmd.Start)
	done := make(chan error, 1)
	go func() { done <- w.cmd.Wait() }()
	require.Eventually(t, func() bool {
		return strings.Contains(w.output(), "cni repair: not watching: this node keeps its rules in iptables")
	},
		repairBound, 50*time.Millisecond, w.output())
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		assert.NoError(t, err, w.output())
	case <-time.After(repairBound):
		_ = w.cmd.Process.Kill()
		t.Fatalf("not stopped within %v of SIGTERM: %s", repairBound, w.output())
	}
}

// TestRepairPutsBackBridgesSpoofCheck: bridge's MAC spoof check (a bridge-family
// nftables table) goes with `nft flush ruleset`; STATUS names it, repair installs it
// again for the pod's host veth and MAC, and CHECK passes.
func TestRepairPutsBackBridgesSpoofCheck(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-spoof.conflist", `{"cniVersion":"1.1.0","name":"spoof","plugins":[`+
		`{"type":"bridge","bridge":"cni-spoof0","macspoofchk":true,`+
		`"ipam":{"type":"host-local","dataDir":"`+t.TempDir()+`","ranges":[[{"subnet":"10.78.0.0/24"}]]}}]}`)
	ctr := testns.New(t)
	r := e.cni(t, "", "add", "spoof", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	flushRuleset(t, e.host)
	assert.Equal(t, 1, e.cni(t, "", "check", "spoof", ctr.Path).code)
	r = e.cni(t, "", "status", "spoof")
	assert.Contains(t, r.stderr, "bridge: macspoofchk: ")
	assert.Contains(t, r.stderr, "(CNI error code 51)")

	r = e.cni(t, "", "repair", "spoof")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^repaired spoof cnitool-[0-9a-f]+ eth0: bridge: macspoofchk: `, r.stdout)
	assert.Equal(t, run{}, e.cni(t, "", "check", "spoof", ctr.Path))
	assert.Equal(t, run{}, e.cni(t, "", "status", "spoof"))
	assert.Equal(t, run{}, e.cni(t, "", "del", "spoof", ctr.Path))
}

// TestRepairNamesTheExecdPluginsItCannotAsk: REPAIR is no spec command, so a plugin of
// another project (exec'd from CNI_PATH) is never run by `cni repair`: its line names
// it, and the plugin sees nothing but the ADD.
func TestRepairNamesTheExecdPluginsItCannotAsk(t *testing.T) {
	e := newEnv(t)
	rec, err := testns.BuildHelper("../../chain/testdata/recorder")
	require.NoError(t, err)
	if !testns.Prebuilt() {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(rec)) })
	}
	require.NoError(t, os.Symlink(rec, filepath.Join(e.pluginDir, "recorder")))
	records := filepath.Join(t.TempDir(), "records")
	e.conf(t, "10-rec.conflist", `{"cniVersion":"1.1.0","name":"rec","plugins":[{"type":"loopback"},`+
		`{"type":"recorder","recordFile":"`+records+`"}]}`)
	ctr := testns.New(t)
	r := e.cni(t, "", "add", "rec", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)

	r = e.cni(t, "", "repair")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^ok rec cnitool-[0-9a-f]+ eth0 \(exec'd plugins not asked: recorder\)\n$`, r.stdout)
	data, err := os.ReadFile(records)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(data), "\n"), "the recorder ran once, for the ADD: %s", data)
	assert.Equal(t, run{}, e.cni(t, "", "del", "rec", ctr.Path))
}
