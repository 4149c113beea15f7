package tuning

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// FuzzLoad drives tuning configs (sysctl, mac, mtu, promisc, allmulti, txQLen, dataDir,
// args.cni overrides, runtimeConfig.mac, CNI_ARGS MAC=) through skel's ADD path and
// tuning's validation, with a node allow-list in place. A refused config is a config
// error (never 999). An accepted plan only names sysctls under net/ that the allow-list
// matches, a unicast 6-byte MAC and an MTU the kernel takes, and written back out the
// config loads to the same plan.
func FuzzLoad(f *testing.F) {
	allow := filepath.Join(f.TempDir(), "allowlist.conf")
	policy := "# node policy\n^net\\.ipv4\\.conf\\.IFNAME\\.[a-z_]+$\n^net\\.core\\.somaxconn$\n^net/ipv6/conf/.*\n"
	if err := os.WriteFile(allow, []byte(policy), 0o600); err != nil {
		f.Fatal(err)
	}
	p := New(allow)
	prepare := tuner{allowList: allow}.prepare
	prev := `"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/c"}],"ips":[{"address":"10.1.0.5/24","interface":0}]}`
	for _, seed := range []struct{ config, cniArgs string }{
		{`{"cniVersion":"1.1.0","name":"n","type":"tuning","sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net.core.somaxconn":"1234"},` + prev + `}`, ""},
		{`{"cniVersion":"1.0.0","name":"n","type":"tuning","mac":"c2:b0:57:49:47:f1","mtu":1454,"promisc":true,"allmulti":false,"txQLen":20000,` +
			`"dataDir":"/run/cni/tuning-test",` + prev + `}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"tuning","capabilities":{"mac":true},"runtimeConfig":{"mac":"0a:58:0a:4d:00:99"},` +
			`"args":{"cni":{"mtu":9000,"promisc":false,"sysctl":{"net/ipv6/conf/eth0.1/accept_ra":"0"}}},` + prev + `}`, "MAC=0a:58:0a:4d:00:97"},
		{`{"cniVersion":"0.4.0","name":"n","type":"tuning","sysctl":{"net.ipv4.ip_forward":"1"},` +
			`"prevResult":{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"/x"}]}}`, "IgnoreUnknown=1"},
		{`{"cniVersion":"1.1.0","name":"n","type":"tuning","sysctl":{"kernel.core_pattern":"|/bin/sh","net/../kernel/x":"1"},` + prev + `}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"tuning","mac":"01:00:5e:00:00:01","mtu":10,"txQLen":-1,` + prev + `}`, "MAC=zz"},
		{`{"cniVersion":"1.1.0","name":"n","type":"tuning","mtu":1500}`, ""},
	} {
		f.Add([]byte(seed.config), seed.cniArgs)
	}
	f.Fuzz(func(t *testing.T, config []byte, cniArgs string) {
		l, ok := skeltest.Accepted(t, p, skeltest.AddArgs(cniArgs), config, prepare)
		if !ok {
			return
		}
		plan := l.Value
		for _, s := range plan.Sysctls {
			if _, err := sysctl.Name(s.Name); err != nil || !strings.HasPrefix(s.Name, "net/") {
				t.Fatalf("accepted sysctl %q as %q: %v", s.Key, s.Name, err)
			}
		}
		if plan.Mac != nil && (len(plan.Mac) != 6 || plan.Mac[0]&1 != 0) {
			t.Fatalf("accepted MAC %s", plan.Mac)
		}
		if plan.Mtu != 0 && (plan.Mtu < 68 || plan.Mtu > 65535) || plan.TxQLen != nil && *plan.TxQLen < 0 {
			t.Fatalf("accepted mtu %d, txQLen %v", plan.Mtu, plan.TxQLen)
		}
		conf, err := skel.LoadConfig[Config](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, p, l, conf, prepare)
	})
}
