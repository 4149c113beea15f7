package bridge

import (
	"testing"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// loadForAdd is the parse-and-validate part of ADD: the config, then the masquerade
// options (ipMasqBackend is validated there).
var loadForAdd = skeltest.Then(load, (*Config).MasqOptions)

// FuzzLoad drives bridge configs (and CNI_ARGS MAC=) through skel's ADD path and
// bridge's loader: a refused config is a config error (never 999), an accepted one has
// a valid bridge name, MTU, VLAN and MAC, and written back out it loads to the same
// settings.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct{ config, cniArgs string }{
		{`{"cniVersion":"1.1.0","name":"demo","type":"bridge","bridge":"cni-demo0","isGateway":true,"ipMasq":true,` +
			`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}}`, ""},
		{`{"cniVersion":"0.3.1","name":"mynet","type":"bridge","bridge":"cni0","isDefaultGateway":true,"forceAddress":false,` +
			`"ipMasq":true,"hairpinMode":true,"mtu":1450,"ipam":{"type":"host-local","subnet":"10.10.0.0/16"}}`, ""},
		{`{"cniVersion":"1.0.0","name":"l2","type":"bridge","bridge":"br1","vlan":100,"preserveDefaultVlan":true,` +
			`"vlanTrunk":[{"id":101},{"minID":200,"maxID":299}],"ipam":{}}`, ""},
		{`{"cniVersion":"1.0.0","name":"n","type":"bridge","promiscMode":true,"macspoofchk":true,"enabledad":true,` +
			`"portIsolation":true,"disableContainerInterface":true}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"bridge","ipMasq":true,"ipMasqIPv6":false,"ipMasqBackend":"nftables",` +
			`"ipam":{"type":"static"},"runtimeConfig":{"mac":"0a:58:0a:4d:00:99"}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"bridge","ipMasqIPv4":true,"ipMasqBackend":"iptables",` +
			`"args":{"cni":{"mac":"0a:58:0a:4d:00:98"}}}`, "IgnoreUnknown=1;MAC=0a:58:0a:4d:00:97"},
		{`{"cniVersion":"0.4.0","name":"n","type":"bridge","prevResult":{"cniVersion":"0.4.0",` +
			`"ips":[{"version":"4","address":"10.1.0.5/24"}]},"dns":{"nameservers":["10.1.0.1"]}}`, "MAC=0a:58:0a:4d:00:97;IP=10.1.0.5"},
		{`{"cniVersion":"1.1.0","name":"n","type":"bridge","vlanTrunk":[{"id":0}],"mtu":70000}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"bridge","bridge":"a/b","ipMasqBackend":"pf"}`, "MAC=zz"},
	} {
		f.Add([]byte(seed.config), seed.cniArgs)
	}
	f.Fuzz(func(t *testing.T, config []byte, cniArgs string) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(cniArgs), config, loadForAdd)
		if !ok {
			return
		}
		c := l.Value.Conf
		if err := skel.ValidateIfName(c.Bridge); err != nil {
			t.Fatalf("accepted bridge name %q: %v", c.Bridge, err)
		}
		if c.MTU != 0 && (c.MTU < minMTU || c.MTU > maxMTU) || c.VLAN < 0 || c.VLAN > 4094 {
			t.Fatalf("accepted mtu %d, vlan %d", c.MTU, c.VLAN)
		}
		for _, r := range c.trunk {
			if *r.MinID < 1 || *r.MinID > *r.MaxID || *r.MaxID > 4094 {
				t.Fatalf("accepted trunk range %d-%d", *r.MinID, *r.MaxID)
			}
		}
		if c.mac != nil && (len(c.mac) != 6 || c.mac[0]&1 != 0) {
			t.Fatalf("accepted MAC %s", c.mac)
		}
		skeltest.RequireStable(t, Plugin(), l, c, loadForAdd)
	})
}
