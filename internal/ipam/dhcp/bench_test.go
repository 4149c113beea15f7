package dhcp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/reftest"
	"github.com/cnikit/cni/internal/testns"
)

// BenchmarkIPAMAdd times an exec'd dhcp IPAM ADD (a DISCOVER/OFFER/REQUEST/ACK with
// dnsmasq on a veth) followed, untimed, by its DEL: ours against our daemon and the
// reference plugin against its own daemon, in the same run.
func BenchmarkIPAMAdd(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartDaemon(testns.Binary(b))
		benchAdd(b, lab, filepath.Join(testns.LinkPluginDir(b, "dhcp"), "dhcp"), d.Socket)
	})
	b.Run("reference", func(b *testing.B) {
		bin := reftest.Bin(b, "dhcp")
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartReferenceDaemon(bin)
		benchAdd(b, lab, bin, d.Socket)
	})
}

func benchAdd(b *testing.B, lab *dhcptest.Lab, bin, socket string) {
	conf := ipamOnlyConfB(b, socket)
	c := &ctr{ns: testns.NewWithLoopback(b), id: "bench"}
	lab.Plug(c.ns, "eth0", "benchport0")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.id = fmt.Sprintf("bench-%d", i)
		if out, err := execIPAMB(b, lab.Host, bin, "ADD", c, conf); err != nil {
			b.Fatalf("ADD: %v %s", err, out)
		}
		b.StopTimer()
		if out, err := execIPAMB(b, lab.Host, bin, "DEL", c, conf); err != nil {
			b.Fatalf("DEL: %v %s", err, out)
		}
		b.StartTimer()
	}
}

// BenchmarkDaemonRSSWith100Leases reports the resident memory of a daemon holding 100
// leases (goal: 30 MB or less), and the reference daemon's beside it.
func BenchmarkDaemonRSSWith100Leases(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartDaemon(testns.Binary(b))
		benchRSS(b, lab, d, filepath.Join(testns.LinkPluginDir(b, "dhcp"), "dhcp"))
	})
	b.Run("reference", func(b *testing.B) {
		bin := reftest.Bin(b, "dhcp")
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartReferenceDaemon(bin)
		benchRSS(b, lab, d, bin)
	})
}

func benchRSS(b *testing.B, lab *dhcptest.Lab, d *dhcptest.Daemon, bin string) {
	conf := ipamOnlyConfB(b, d.Socket)
	for i := 0; i < 100; i++ {
		c := &ctr{ns: testns.NewWithLoopback(b), id: fmt.Sprintf("rss-%d", i)}
		lab.Plug(c.ns, "eth0", fmt.Sprintf("rss%d", i))
		if out, err := execIPAMB(b, lab.Host, bin, "ADD", c, conf); err != nil {
			b.Fatalf("ADD %d: %v %s", i, err, out)
		}
	}
	time.Sleep(2 * time.Second) // let the goroutines of 100 fresh leases settle
	for i := 0; i < b.N; i++ {
		b.ReportMetric(rssMB(b, d.Pid()), "MB-RSS")
	}
	if n := len(lab.Leases()); n != 100 {
		b.Fatalf("the server holds %d leases, want 100", n)
	}
}

func rssMB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
