package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// BenchmarkExecAddDel measures what a runtime pays: the bridge binary exec'd for ADD and
// then DEL (host-local in-process, ipMasq on) with a given number of other attachments
// already on the bridge. It reports the median of each command in ms.
func BenchmarkExecAddDel(b *testing.B) {
	for _, backend := range []netfilter.Backend{netfilter.NFTables, netfilter.IPTables} {
		for _, existing := range []int{10, 300} {
			b.Run(fmt.Sprintf("%s/%d", backend, existing), func(b *testing.B) {
				if backend == netfilter.IPTables {
					testns.RequireFirewallBinaries(b, "the iptables masquerade backend runs iptables-restore")
				}
				benchAddDel(b, backend, existing)
			})
		}
	}
}

func benchAddDel(b *testing.B, backend netfilter.Backend, existing int) {
	w := newWorld(b)
	dir := testns.LinkPluginDir(b, "bridge", "host-local")
	conf := w.conf(map[string]any{"isGateway": true, "ipMasq": true, "ipMasqBackend": string(backend),
		"ipam": w.hostLocal("10.64.0.0/16")})
	for range existing {
		w.add(conf)
	}
	var adds, dels []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ctr := testns.New(b)
		id := fmt.Sprintf("bench-%d", i)
		b.StartTimer()
		start := time.Now()
		if _, err := w.execPlugin(dir, "bridge", "ADD", id, ctr.Path, conf); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := w.execPlugin(dir, "bridge", "DEL", id, ctr.Path, conf); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		adds, dels = append(adds, mid.Sub(start)), append(dels, end.Sub(mid))
		b.StopTimer()
		ctr.Close()
		b.StartTimer()
	}
	b.ReportMetric(timing.MedianMs(adds), "add-ms")
	b.ReportMetric(timing.MedianMs(dels), "del-ms")
}
