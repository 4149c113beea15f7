package dhcp_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// BenchmarkIPAMAdd times an exec'd dhcp IPAM ADD (a DISCOVER/OFFER/REQUEST/ACK with
// dnsmasq on a veth, and with ipv6 a SOLICIT/REPLY beside it) followed, untimed, by its
// DEL: ours IPv4 only, ours dual stack, and the reference plugin against its own
// daemon, in the same run. The container's link is made once and reused, as each ADD's
// is the same work; "dualstack-new-link" makes a new one per ADD (untimed) and so also
// times the wait for its IPv6 link-local address (duplicate address detection), which a
// real pod's first DHCPv6 exchange pays.
func BenchmarkIPAMAdd(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartDaemon(testns.Binary(b))
		benchAdd(b, lab, testns.LinkPlugin(b, "dhcp"), ipamOnlyConf(b, d.Socket), false)
	})
	b.Run("ours-dualstack", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{IPv6: true})
		d := lab.StartDaemon(testns.Binary(b))
		benchAdd(b, lab, testns.LinkPlugin(b, "dhcp"), ipamConf(b, d.Socket, map[string]any{"ipv6": true}), false)
	})
	b.Run("ours-dualstack-new-link", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{IPv6: true})
		d := lab.StartDaemon(testns.Binary(b))
		benchAdd(b, lab, testns.LinkPlugin(b, "dhcp"), ipamConf(b, d.Socket, map[string]any{"ipv6": true}), true)
	})
	b.Run("reference", func(b *testing.B) {
		bin := reftest.Bin(b, "dhcp")
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartReferenceDaemon(bin)
		benchAdd(b, lab, bin, ipamOnlyConf(b, d.Socket), false)
	})
}

func benchAdd(b *testing.B, lab *dhcptest.Lab, bin string, conf []byte, newLink bool) {
	c := &ctr{ns: testns.NewWithLoopback(b), id: "bench"}
	lab.Plug(c.ns, "eth0", "benchport0")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.id = fmt.Sprintf("bench-%d", i)
		if newLink && i > 0 {
			b.StopTimer()
			c.ns = testns.NewWithLoopback(b)
			lab.Plug(c.ns, "eth0", fmt.Sprintf("benchport%d", i))
			b.StartTimer()
		}
		if out, err := execIPAM(b, lab.Host, bin, "ADD", c, conf); err != nil {
			b.Fatalf("ADD: %v %s", err, out)
		}
		b.StopTimer()
		if out, err := execIPAM(b, lab.Host, bin, "DEL", c, conf); err != nil {
			b.Fatalf("DEL: %v %s", err, out)
		}
		b.StartTimer()
	}
}

// BenchmarkDaemonRSSWith100Leases reports the resident memory of a daemon holding 100
// leases (goal: 30 MB or less), ours IPv4 only and dual stack (100 of each family), and
// the reference daemon's beside them.
func BenchmarkDaemonRSSWith100Leases(b *testing.B) {
	b.Run("ours", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartDaemon(testns.Binary(b))
		benchRSS(b, lab, d, testns.LinkPlugin(b, "dhcp"), ipamOnlyConf(b, d.Socket), false)
	})
	b.Run("ours-dualstack", func(b *testing.B) {
		lab := dhcptest.New(b, dhcptest.Options{IPv6: true})
		d := lab.StartDaemon(testns.Binary(b))
		benchRSS(b, lab, d, testns.LinkPlugin(b, "dhcp"), ipamConf(b, d.Socket, map[string]any{"ipv6": true}), true)
	})
	b.Run("reference", func(b *testing.B) {
		bin := reftest.Bin(b, "dhcp")
		lab := dhcptest.New(b, dhcptest.Options{})
		d := lab.StartReferenceDaemon(bin)
		benchRSS(b, lab, d, bin, ipamOnlyConf(b, d.Socket), false)
	})
}

// benchRSS makes 100 attachments, ten ADDs at a time (each new link waits for its IPv6
// link-local address first), and reads the daemon's RSS once they are all held.
func benchRSS(b *testing.B, lab *dhcptest.Lab, d *dhcptest.Daemon, bin string, conf []byte, dual bool) {
	ctrs := make([]*ctr, 100)
	for i := range ctrs {
		ctrs[i] = &ctr{ns: testns.NewWithLoopback(b), id: fmt.Sprintf("rss-%d", i)}
		lab.Plug(ctrs[i].ns, "eth0", fmt.Sprintf("rss%d", i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(ctrs))
	sem := make(chan struct{}, 10)
	for _, c := range ctrs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if out, err := execIPAM(b, lab.Host, bin, "ADD", c, conf); err != nil {
				errs <- fmt.Errorf("ADD %s: %v %s", c.id, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let the goroutines of 100 fresh leases settle
	for i := 0; i < b.N; i++ {
		b.ReportMetric(rssMB(b, d.Pid()), "MB-RSS")
	}
	if n := len(lab.Leases()); n != 100 {
		b.Fatalf("the server holds %d DHCPv4 leases, want 100", n)
	}
	if n := len(lab.Leases6()); dual && n != 100 {
		b.Fatalf("the server holds %d DHCPv6 leases, want 100", n)
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
