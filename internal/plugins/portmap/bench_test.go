package portmap

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/testbed/nftrecord"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// BenchmarkNFTAddDel runs the nftables backend's ADD then DEL of one attachment with
// one mapping and snat, in-process, while others attachments hold mappings, and
// reports besides the wall time the process's CPU time (the kernel's work for our
// messages is done in our syscalls) and the messages sent per ADD and per DEL, which
// do not move with the machine's load.
func BenchmarkNFTAddDel(b *testing.B) {
	testns.RequireRoot(b)
	for _, others := range []int{10, 1000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			host := testns.New(b)
			s := &settings{snat: true, backend: netfilter.NFTables}
			fam := func(i int) []family {
				return []family{{addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i / 250), byte(i%250 + 2)}), 16),
					mappings: []mapping{{proto: "tcp", hostPort: uint16(20000 + i), containerPort: 80}}}}
			}
			ctx := context.Background()
			var rec nftrecord.Recorder
			defer rec.Close()
			be := nftBackend{conn: rec.Option()}
			host.Run(b, func() error {
				for i := range others {
					if err := be.add(ctx, attachment{net: "bench", cid: fmt.Sprintf("o%d", i)}, s, fam(i)); err != nil {
						return err
					}
				}
				return nil
			})
			var addMsgs, delMsgs int
			var cpu time.Duration
			i := others
			for b.Loop() {
				i++
				o := attachment{net: "bench", cid: fmt.Sprintf("b%d", i)}
				before := cpuTime()
				err := host.Do(func() error {
					rec.Reset()
					if err := be.add(ctx, o, s, fam(i)); err != nil {
						return err
					}
					addMsgs += len(rec.Sent())
					rec.Reset()
					_, err := be.del(ctx, o.hash())
					delMsgs += len(rec.Sent())
					return err
				})
				cpu += cpuTime() - before
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(addMsgs)/float64(b.N), "msgs/ADD")
			b.ReportMetric(float64(delMsgs)/float64(b.N), "msgs/DEL")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
