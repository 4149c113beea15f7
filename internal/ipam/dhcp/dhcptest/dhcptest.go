// Package dhcptest is the test bed of the dhcp plugin and of every main plugin tested
// with ipam.type dhcp (bridge, macvlan, ...): a real dnsmasq serving a LAN in a
// throwaway "server" namespace, linked by a veth to a bridge in a throwaway "host"
// namespace where plugins and the dhcp daemon run. Nothing touches the machine's own
// namespace; dnsmasq's lease file, the daemon's socket and its lease files live in the
// test's temp dirs, and every process is killed in t.Cleanup.
//
//	server netns: srv0 10.99.0.1/24 fd99::1/64, dnsmasq
//	    | veth
//	host netns:   uplink0 -- bridge dhcpbr0 (10.99.0.2/24), plugins, dhcp daemon
//	    | veths made by the bridge plugin (bridge: dhcpbr0)
//	containers:   eth0 from DHCP, 10.99.0.50-150 (and with Options.IPv6 from DHCPv6,
//	              fd99::100-1ff)
//
// A macvlan test uses the bridge as its master ("master": dhcptest.Bridge): frames a
// macvlan sends through its parent bridge reach the server as any port's do.
package dhcptest

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// Fixed addresses of the lab.
const (
	Subnet    = "10.99.0.0/24"
	ServerIP  = "10.99.0.1"
	HostIP    = "10.99.0.2"
	Bridge    = "dhcpbr0"
	DNSServer = "10.99.0.53"
	Domain    = "lab.example"
	// StaticDst/StaticGW is the classless route (option 121) the server hands out.
	StaticDst = "192.0.2.0/24"
	StaticGW  = "10.99.0.254"

	// The DHCPv6 side: the server's address on the LAN, the pool, the DNS server it
	// names (option 23) and its search list (option 24, Domain).
	Subnet6    = "fd99::/64"
	ServerIP6  = "fd99::1"
	DNSServer6 = "fd99::53"
)

// Lab is one dnsmasq-served LAN.
type Lab struct {
	t         testing.TB
	Host      *testns.NS
	Server    *testns.NS
	LeaseFile string
	dnsmasq   *exec.Cmd
}

// Options shape the server.
type Options struct {
	// LeaseTime is dnsmasq's lease time (it refuses less than 2 minutes); 0 means 1h.
	LeaseTime time.Duration
	// RenewAfter sets option 58 (T1) and RebindAfter option 59 (T2) when non-zero.
	RenewAfter, RebindAfter time.Duration
	// Classless adds option 121 with StaticDst via StaticGW (and the default route
	// through the router, which 121 must then carry itself).
	Classless bool
	// Pool is the dhcp-range's first and last address; empty means 10.99.0.50-150.
	Pool [2]string
	// IPv6 serves DHCPv6 too (fd99::100-1ff, or Pool6, with the same LeaseTime; dnsmasq
	// answers a SOLICIT that asks for rapid commit with the REPLY at once); RA sends
	// router advertisements for fd99::/64 (managed flag, on-link, the server as router).
	IPv6, RA bool
	Pool6    [2]string
}

// New starts the lab. A missing dnsmasq fails the test rather than skipping it: the
// project's machines install dnsmasq-base.
func New(t testing.TB, o Options) *Lab {
	t.Helper()
	testns.RequireRoot(t)
	if _, err := exec.LookPath("dnsmasq"); err != nil {
		t.Fatalf("dnsmasq is needed (apt-get install dnsmasq-base): %v", err)
	}
	l := &Lab{t: t, Host: testns.NewWithLoopback(t), Server: testns.NewWithLoopback(t)}
	l.wire()
	l.startDnsmasq(o)
	return l
}

// wire builds the server veth and the host bridge.
func (l *Lab) wire() {
	testns.Veth(l.t, l.Server, "srv0", []string{ServerIP + "/24", ServerIP6 + "/64"}, l.Host, "uplink0", nil)
	if err := l.Host.Handle(l.t).LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: Bridge}}); err != nil {
		l.t.Fatalf("bridge: %v", err)
	}
	l.enslave("uplink0")
	testns.Up(l.t, l.Host, Bridge, HostIP+"/24")
}

// enslave makes the host namespace's link called name a port of the bridge.
func (l *Lab) enslave(name string) {
	h := l.Host.Handle(l.t)
	port, err := h.LinkByName(name)
	if err != nil {
		l.t.Fatal(err)
	}
	br, err := h.LinkByName(Bridge)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := h.LinkSetMaster(port, br); err != nil {
		l.t.Fatal(err)
	}
}

// RestartServer replaces dnsmasq with one configured by o, with an empty lease file: a
// server that has forgotten every lease (and, authoritative, refuses them).
func (l *Lab) RestartServer(o Options) {
	l.StopServer()
	l.startDnsmasq(o)
}

// startDnsmasq starts dnsmasq with its lease file and log in a new temp dir.
func (l *Lab) startDnsmasq(o Options) {
	dir := l.t.TempDir()
	l.LeaseFile = filepath.Join(dir, "dnsmasq.leases")
	lt := cmp.Or(o.LeaseTime, time.Hour)
	pool := o.Pool
	if pool[0] == "" {
		pool = [2]string{"10.99.0.50", "10.99.0.150"}
	}
	args := []string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--user=root", "--group=root",
		"--interface=srv0", "--bind-interfaces", "--no-ping", "--dhcp-authoritative", "--log-dhcp",
		"--log-facility=" + filepath.Join(dir, "dnsmasq.log"),
		"--pid-file=" + filepath.Join(dir, "dnsmasq.pid"),
		"--dhcp-leasefile=" + l.LeaseFile,
		fmt.Sprintf("--dhcp-range=%s,%s,255.255.255.0,%ds", pool[0], pool[1], int(lt.Seconds())),
		"--dhcp-option=option:router," + ServerIP,
		"--dhcp-option=option:dns-server," + DNSServer,
		"--dhcp-option=option:domain-name," + Domain,
	}
	if o.RenewAfter > 0 {
		args = append(args, fmt.Sprintf("--dhcp-option=option:T1,%ds", int(o.RenewAfter.Seconds())))
	}
	if o.RebindAfter > 0 {
		args = append(args, fmt.Sprintf("--dhcp-option=option:T2,%ds", int(o.RebindAfter.Seconds())))
	}
	if o.Classless {
		args = append(args, "--dhcp-option=option:classless-static-route,"+StaticDst+","+StaticGW+",0.0.0.0/0,"+ServerIP)
	}
	if o.IPv6 {
		args = append(args, dhcpv6Args(o, lt)...)
	}
	cmd := exec.Command("dnsmasq", args...)
	cmd.Stderr = &prefixWriter{t: l.t, prefix: "dnsmasq: "}
	l.Server.Run(l.t, cmd.Start)
	l.dnsmasq = cmd
	l.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if l.t.Failed() || os.Getenv("DHCPTEST_VERBOSE") != "" {
			if b, err := os.ReadFile(filepath.Join(dir, "dnsmasq.log")); err == nil {
				l.t.Logf("dnsmasq log:\n%s", b)
			}
		}
	})
	l.waitListening()
}

// dhcpv6Args are dnsmasq's flags for the DHCPv6 side.
func dhcpv6Args(o Options, lt time.Duration) []string {
	pool := o.Pool6
	if pool[0] == "" {
		pool = [2]string{"fd99::100", "fd99::1ff"}
	}
	args := []string{
		fmt.Sprintf("--dhcp-range=%s,%s,64,%ds", pool[0], pool[1], int(lt.Seconds())),
		"--dhcp-option=option6:dns-server,[" + DNSServer6 + "]",
		"--dhcp-option=option6:domain-search," + Domain,
	}
	if o.RA {
		args = append(args, "--enable-ra")
	}
	return args
}

// StopServer kills dnsmasq: from then on nobody answers DHCP on the LAN.
func (l *Lab) StopServer() {
	_ = l.dnsmasq.Process.Kill()
	_, _ = l.dnsmasq.Process.Wait()
}

// waitListening waits until dnsmasq has bound its DHCP socket (it writes its pid file
// after that).
func (l *Lab) waitListening() {
	pidFile := filepath.Join(filepath.Dir(l.LeaseFile), "dnsmasq.pid")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(pidFile); err == nil {
			return
		}
		if l.dnsmasq.ProcessState != nil {
			break
		}
	}
	l.t.Fatalf("dnsmasq did not start")
}

// Lease is one line of dnsmasq's lease file.
type Lease struct {
	Expiry   time.Time
	MAC      string
	IP       string
	Hostname string
	// ClientID is the client identifier as text (type byte dropped) when it was one of
	// type 0, else dnsmasq's hex.
	ClientID string
}

// Leases reads dnsmasq's DHCPv4 leases.
func (l *Lab) Leases() []Lease {
	return leasesOf(l, false, func(fields []string) Lease {
		return Lease{Expiry: expiry(fields[0]), MAC: fields[1], IP: fields[2], Hostname: fields[3],
			ClientID: clientIDText(fields[4])}
	})
}

// Lease6 is one DHCPv6 lease of dnsmasq's lease file.
type Lease6 struct {
	Expiry time.Time
	IAID   uint32
	IP     string
	// DUID is the client's DUID as dnsmasq writes it (hex bytes with colons).
	DUID string
}

// Leases6 reads dnsmasq's DHCPv6 leases.
func (l *Lab) Leases6() []Lease6 {
	return leasesOf(l, true, func(fields []string) Lease6 {
		iaid, _ := strconv.ParseUint(fields[1], 10, 32)
		return Lease6{Expiry: expiry(fields[0]), IAID: uint32(iaid), IP: fields[2], DUID: fields[4]}
	})
}

// leasesOf reads the lease lines of one family (dnsmasq keeps both in one file; a
// DHCPv6 lease is the one whose address has a colon) through parse.
func leasesOf[T any](l *Lab, ipv6 bool, parse func(fields []string) T) []T {
	var out []T
	for _, fields := range l.leaseLines() {
		if strings.Contains(fields[2], ":") == ipv6 {
			out = append(out, parse(fields))
		}
	}
	return out
}

// Lease6Of returns the server's DHCPv6 lease for a DUID, if it has one.
func (l *Lab) Lease6Of(duid []byte) (Lease6, bool) {
	text := strings.ReplaceAll(fmt.Sprintf("% x", duid), " ", ":") // as dnsmasq writes it
	return find(l.Leases6(), func(le Lease6) bool { return le.DUID == text })
}

// find returns the first lease that is, if any.
func find[T any](leases []T, is func(T) bool) (T, bool) {
	if i := slices.IndexFunc(leases, is); i >= 0 {
		return leases[i], true
	}
	var none T
	return none, false
}

// WaitLease6 is WaitLease for a DHCPv6 lease.
func (l *Lab) WaitLease6(duid []byte, timeout time.Duration, cond func(Lease6, bool) bool) (Lease6, bool) {
	return wait(timeout, func() (Lease6, bool) { return l.Lease6Of(duid) }, cond)
}

// Released6 is Released for a DHCPv6 lease.
func (l *Lab) Released6(duid []byte) bool {
	_, ok := l.WaitLease6(duid, releaseWait, func(_ Lease6, ok bool) bool { return !ok })
	return !ok
}

// Extended6 is Extended for a DHCPv6 lease.
func (l *Lab) Extended6(duid []byte, past time.Time) Lease6 {
	le, _ := l.WaitLease6(duid, extendWait, func(le Lease6, ok bool) bool { return ok && le.Expiry.After(past) })
	return le
}

// leaseLines reads dnsmasq's lease file into the fields of its lease lines. dnsmasq
// rewrites it in place (truncate, then write), so a read can catch it empty or half
// written: the file is read until two reads a moment apart agree.
func (l *Lab) leaseLines() [][]string {
	var data []byte
	for range 50 {
		first := l.readLeaseFile()
		time.Sleep(10 * time.Millisecond)
		data = l.readLeaseFile()
		if bytes.Equal(first, data) {
			break
		}
	}
	var out [][]string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 || fields[0] == "duid" {
			continue
		}
		out = append(out, fields)
	}
	return out
}

func expiry(field string) time.Time {
	secs, _ := strconv.ParseInt(field, 10, 64)
	return time.Unix(secs, 0)
}

func (l *Lab) readLeaseFile() []byte {
	data, err := os.ReadFile(l.LeaseFile)
	if err != nil && !os.IsNotExist(err) {
		l.t.Fatal(err)
	}
	return data
}

// LeaseOf returns the server's lease for a client id, if it has one.
func (l *Lab) LeaseOf(clientID string) (Lease, bool) {
	return find(l.Leases(), func(le Lease) bool { return le.ClientID == clientID })
}

// WaitLease waits until cond holds for the client id's lease state (found, lease)
// or the timeout passes, and returns the last state.
func (l *Lab) WaitLease(clientID string, timeout time.Duration, cond func(Lease, bool) bool) (Lease, bool) {
	return wait(timeout, func() (Lease, bool) { return l.LeaseOf(clientID) }, cond)
}

// Released waits (a few seconds) for the server to drop the client id's lease, and says
// whether it did.
func (l *Lab) Released(clientID string) bool {
	_, ok := l.WaitLease(clientID, releaseWait, func(_ Lease, ok bool) bool { return !ok })
	return !ok
}

// Extended waits (a few seconds) for the client id's lease to expire later than past,
// and returns it.
func (l *Lab) Extended(clientID string, past time.Time) Lease {
	le, _ := l.WaitLease(clientID, extendWait, func(le Lease, ok bool) bool { return ok && le.Expiry.After(past) })
	return le
}

// PastExpiryGrain waits out dnsmasq's one-second grain of lease expiry, so that a lease
// extended from now on shows a later expiry than it has.
func PastExpiryGrain() { time.Sleep(1100 * time.Millisecond) }

// How long Released and Extended wait: a release is one message, a confirmation after a
// daemon restart one exchange.
const (
	releaseWait = 5 * time.Second
	extendWait  = 10 * time.Second
)

// wait polls find until cond holds for what it finds or the timeout passes.
func wait[T any](timeout time.Duration, find func() (T, bool), cond func(T, bool) bool) (T, bool) {
	deadline := time.Now().Add(timeout)
	for {
		v, ok := find()
		if cond(v, ok) || time.Now().After(deadline) {
			return v, ok
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func clientIDText(hexID string) string {
	b, err := hex.DecodeString(strings.ReplaceAll(hexID, ":", ""))
	if err != nil || len(b) < 2 || b[0] != 0 {
		return hexID
	}
	return string(b[1:])
}

// Plug gives a container namespace an interface on the lab's LAN without any plugin: a
// veth whose container end is ifName (up, no address) and whose other end is a port of
// the bridge. It is for running an IPAM plugin on its own.
func (l *Lab) Plug(n *testns.NS, ifName, hostName string) {
	l.t.Helper()
	testns.Veth(l.t, n, ifName, nil, l.Host, hostName, nil)
	l.enslave(hostName)
}

// Daemon is a `cni dhcp daemon` process running in the lab's host namespace.
type Daemon struct {
	Socket   string
	StateDir string
	cmd      *exec.Cmd
	lab      *Lab
	args     []string
	log      *prefixWriter
}

// StartDaemon execs bin (the cni binary) as `cni dhcp daemon` in the host namespace
// with a socket and state dir in temp dirs, plus extra flags, and waits for its socket.
func (l *Lab) StartDaemon(bin string, extra ...string) *Daemon {
	l.t.Helper()
	return l.StartDaemonOn(filepath.Join(l.t.TempDir(), "dhcp.sock"), bin, extra...)
}

// StartDaemonOn is StartDaemon with the socket at socket: where another daemon (the
// reference's, in an upgrade) listened before.
func (l *Lab) StartDaemonOn(socket, bin string, extra ...string) *Daemon {
	l.t.Helper()
	d := &Daemon{Socket: socket, StateDir: filepath.Join(l.t.TempDir(), "leases"), lab: l,
		log: &prefixWriter{t: l.t, prefix: "daemon: "}}
	d.args = append([]string{bin, "dhcp", "daemon", "-socketpath", d.Socket, "-statedir", d.StateDir,
		"-timeout", "2s", "-resendmax", "2s"}, extra...)
	d.Start()
	l.t.Cleanup(d.Kill)
	return d
}

// StartReferenceDaemon execs the reference plugins' dhcp binary as its daemon, which
// keeps no state dir.
func (l *Lab) StartReferenceDaemon(bin string) *Daemon {
	l.t.Helper()
	d := &Daemon{Socket: filepath.Join(l.t.TempDir(), "ref-dhcp.sock"), lab: l, log: &prefixWriter{t: l.t, prefix: "reference daemon: "}}
	d.args = []string{bin, "daemon", "-socketpath", d.Socket, "-timeout", "2s", "-resendmax", "2s"}
	d.Start()
	l.t.Cleanup(d.Kill)
	return d
}

// Start (re)starts the daemon process with the same flags.
func (d *Daemon) Start() {
	t := d.lab.t
	t.Helper()
	cmd := exec.Command(d.args[0], d.args[1:]...)
	cmd.Stderr = d.log
	cmd.Stdout = d.log
	d.lab.Host.Run(t, cmd.Start)
	d.cmd = cmd
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", d.Socket); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("dhcp daemon did not listen on %s", d.Socket)
}

// Kill ends the daemon with SIGKILL (no chance to tidy up, as in a crash or OOM).
func (d *Daemon) Kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	_ = d.cmd.Wait()
	d.cmd = nil
}

// Pid is the daemon's process id.
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// prefixWriter sends a process's output to the test log, line by line.
type prefixWriter struct {
	t      testing.TB
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + line)
	}
	return len(p), nil
}
