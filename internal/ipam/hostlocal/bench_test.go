package hostlocal

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// benchNetwork is a /16 network with `existing` reservations already on disk (in the
// reference layout, indexed by one untimed operation). HOSTLOCAL_BENCH_DIR puts the data
// dir on another filesystem (e.g. /dev/shm, as the docs suggest for a tmpfs dataDir).
func benchNetwork(b *testing.B, existing int) *network {
	b.Helper()
	t := &testing.T{}
	dataDir := b.TempDir()
	if base := os.Getenv("HOSTLOCAL_BENCH_DIR"); base != "" {
		var err error
		if dataDir, err = os.MkdirTemp(base, "hostlocal-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dataDir) })
	}
	n := &network{t: t, dataDir: dataDir, name: "bench", version: "1.1.0",
		ipam: obj{"type": "host-local", "subnet": "10.128.0.0/16"}, extra: obj{}}
	n.ipam["dataDir"] = n.dataDir
	if err := os.MkdirAll(n.dir(), 0o755); err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("10.128.0.2")
	for i := 0; i < existing; i++ {
		if err := os.WriteFile(filepath.Join(n.dir(), a.String()), fmt.Appendf(nil, "existing-%d\r\neth0", i), 0o600); err != nil {
			b.Fatal(err)
		}
		a = a.Next()
	}
	if existing > 0 {
		if err := os.WriteFile(filepath.Join(n.dir(), "last_reserved_ip.0"), []byte(a.Prev().String()), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	if _, _, err := n.invoke(skel.CmdDel, "warmup", "eth0", ""); err != nil { // builds the index
		b.Fatal(err)
	}
	return n
}

func BenchmarkHostLocalAddDelInProcess(b *testing.B) {
	for _, existing := range []int{0, 5000} {
		b.Run(fmt.Sprint(existing), func(b *testing.B) {
			n := benchNetwork(b, existing)
			defer reportCPU(b, syscall.RUSAGE_SELF)()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("bench-%d", i)
				if _, _, err := n.invoke(skel.CmdAdd, id, "eth0", ""); err != nil {
					b.Fatal(err)
				}
				if _, _, err := n.invoke(skel.CmdDel, id, "eth0", ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkHostLocalAddDelExec(b *testing.B) {
	bin := filepath.Join(testns.LinkPluginDir(b, "host-local"), "host-local")
	for _, existing := range []int{0, 5000} {
		b.Run(fmt.Sprint(existing), func(b *testing.B) {
			n := benchNetwork(b, existing)
			conf := n.config()
			defer reportCPU(b, syscall.RUSAGE_CHILDREN)()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("bench-%d", i)
				for _, cmd := range []string{skel.CmdAdd, skel.CmdDel} {
					c := exec.Command(bin)
					c.Env = execEnv(cmd, id, "eth0", filepath.Dir(bin))
					c.Stdin = strings.NewReader(string(conf))
					if out, err := c.CombinedOutput(); err != nil {
						b.Fatalf("%s: %v: %s", cmd, err, out)
					}
				}
			}
		})
	}
}

// execEnv is the environment a runtime gives host-local; the netns path need not exist
// because host-local never enters it.
func execEnv(cmd, id, ifname, path string) []string {
	return []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=" + id, "CNI_IFNAME=" + ifname,
		"CNI_NETNS=/var/run/netns/cni-test-absent", "CNI_PATH=" + path}
}

// reportCPU adds cpu-ns/op (user+system time of this process or of its reaped children)
// to a benchmark: on a shared machine wall time also measures the neighbours' load.
func reportCPU(b *testing.B, who int) func() {
	before := cpuTime(who)
	return func() {
		b.ReportMetric(float64((cpuTime(who)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
