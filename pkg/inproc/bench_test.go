package inproc_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// BenchmarkStandardChain is ADD+DEL of the standard chain through libcni with Exec and
// through Runner, for profiles (make bench's embed section has the figures).
func BenchmarkStandardChain(b *testing.B) {
	testns.RequireRoot(b)
	for _, via := range []string{"libcni with Exec", "Runner"} {
		b.Run(via, func(b *testing.B) {
			host, ctr := testns.New(b), testns.New(b)
			conf, cacheDir := standardChain(filepath.Join(b.TempDir(), "ipam")), b.TempDir()
			rt := runtimeConf("bench", ctr)
			var add, del func(ctx context.Context) error
			if via == "Runner" {
				r := &inproc.Runner{PluginPath: []string{cacheDir}, CacheDir: cacheDir}
				n, err := inproc.Parse([]byte(conf))
				if err != nil {
					b.Fatal(err)
				}
				add = func(ctx context.Context) error { _, err := r.Add(ctx, n, attachment(rt)); return err }
				del = func(ctx context.Context) error { return r.Del(ctx, n, attachment(rt)) }
			} else {
				c := libcni.NewCNIConfigWithCacheDir([]string{cacheDir}, cacheDir, &inproc.Exec{})
				list, err := libcni.ConfListFromBytes([]byte(conf))
				if err != nil {
					b.Fatal(err)
				}
				add = func(ctx context.Context) error { _, err := c.AddNetworkList(ctx, list, rt); return err }
				del = func(ctx context.Context) error { return c.DelNetworkList(ctx, list, rt) }
			}
			host.Run(b, func() error {
				ctx := context.Background()
				for b.Loop() {
					if err := add(ctx); err != nil {
						return err
					}
					b.StopTimer()
					if err := del(ctx); err != nil {
						return err
					}
					b.StartTimer()
				}
				return nil
			})
		})
	}
}
