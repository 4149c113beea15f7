package masq

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// BenchmarkSetupTeardown measures one attachment's Setup plus Teardown (dual stack)
// while n other attachments are masqueraded, per backend: the cost must not grow with n
// for nftables, and grows only with the save/parse of the nat table for iptables.
func BenchmarkSetupTeardown(b *testing.B) {
	testns.RequireRoot(b)
	for _, backend := range backends {
		for _, n := range []int{10, 300} {
			b.Run(fmt.Sprintf("%s/%d", backend, n), func(b *testing.B) {
				host := testns.New(b)
				opts := dualStack(backend)
				ctx := context.Background()
				err := host.Do(func() error {
					for i := range n {
						if err := Setup(ctx, benchAttachment(i), opts); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				att := benchAttachment(n)
				err = host.Do(func() error {
					for b.Loop() {
						if err := Setup(ctx, att, opts); err != nil {
							return err
						}
						if err := Teardown(ctx, att.Network, att.ContainerID, att.IfName); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func benchAttachment(i int) Attachment {
	v4 := netip.AddrFrom4([4]byte{10, 20, byte(i / 250), byte(i%250 + 2)})
	v6 := netip.MustParseAddr(fmt.Sprintf("fd20::%x", i+2))
	return Attachment{Network: "bench", ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0",
		IPs: []netip.Prefix{netip.PrefixFrom(v4, 16), netip.PrefixFrom(v6, 64)}}
}
