package hostlocal

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/spec/skel"
)

// BenchmarkHostLocalGC times one in-process GC of a /16 holding 60,000 reservations
// (the reference's layout, indexed), keeping all of them and releasing all of them.
// Each round starts from a freshly filled data dir, which is not timed. cpu-s/op is the
// process's user+system time during the GC, steadier than the time on a shared machine.
func BenchmarkHostLocalGC(b *testing.B) {
	const existing = 60000
	for _, release := range []bool{false, true} {
		name := "keep"
		if release {
			name = "release"
		}
		b.Run(fmt.Sprintf("%s-%d", name, existing), func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				n := benchNetwork(b, existing)
				valid := []obj{}
				if !release {
					for i := range existing {
						valid = append(valid, obj{"containerID": fmt.Sprintf("existing-%d", i), "ifname": "eth0"})
					}
				}
				n.extra["cni.dev/valid-attachments"] = valid
				b.StartTimer()
				before := ownCPU()
				if _, _, err := n.invoke(skel.CmdGC, "", "", ""); err != nil {
					b.Fatal(err)
				}
				cpu += ownCPU() - before
			}
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

func ownCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
