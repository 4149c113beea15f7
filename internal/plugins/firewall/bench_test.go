package firewall_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// BenchmarkExecAddDel measures the exec'd firewall plugin doing ADD then DEL of one
// dual-stack attachment while n other attachments hold rules, with each rule backend,
// and reports the median of each command, as a runtime would see it.
func BenchmarkExecAddDel(b *testing.B) {
	testns.RequireRoot(b)
	bin := filepath.Join(testns.LinkPluginDir(b, "firewall"), "firewall")
	for _, bc := range []struct {
		backend string
		n       int
	}{{"nftables", 10}, {"nftables", 300}, {"iptables", 10}, {"iptables", 300}} {
		backend, n := bc.backend, bc.n
		b.Run(fmt.Sprintf("%s/others=%d", backend, n), func(b *testing.B) {
			if backend == "iptables" {
				testns.RequireFirewallBinaries(b, "the iptables backend runs iptables-restore")
			}
			host := testns.New(b)
			cont := testns.New(b)
			run := func(command string, i int) (time.Duration, error) {
				conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench","type":"firewall","backend":%q,
"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"br0"}],"ips":[{"address":"10.40.%d.%d/16"},{"address":"fd40::%x/64"}]}}`,
					backend, i/250, i%250+2, i+2)
				cmd := exec.Command(bin)
				cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + fmt.Sprintf("c%d", i),
					"CNI_NETNS=" + cont.Path, "CNI_IFNAME=eth0", "CNI_PATH=" + filepath.Dir(bin), "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
				cmd.Stdin = bytes.NewReader([]byte(conf))
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				var took time.Duration
				err := host.Do(func() error {
					start := time.Now()
					err := cmd.Run()
					took = time.Since(start)
					return err
				})
				if err != nil {
					return 0, fmt.Errorf("%s: %w: %s", command, err, out.String())
				}
				return took, nil
			}
			for i := range n {
				if _, err := run("ADD", i+1); err != nil {
					b.Fatal(err)
				}
			}
			var adds, dels []time.Duration
			for b.Loop() {
				a, err := run("ADD", 0)
				if err != nil {
					b.Fatal(err)
				}
				d, err := run("DEL", 0)
				if err != nil {
					b.Fatal(err)
				}
				adds, dels = append(adds, a), append(dels, d)
			}
			b.ReportMetric(timing.MedianMs(adds), "ms-median-add")
			b.ReportMetric(timing.MedianMs(dels), "ms-median-del")
		})
	}
}
