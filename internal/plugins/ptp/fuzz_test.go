package ptp

import (
	"testing"

	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// loadForAdd is the parse-and-validate part of ADD: the config, then the masquerade
// options (ipMasqBackend is validated there).
var loadForAdd = skeltest.Then(load, (*Config).MasqOptions)

// FuzzLoad drives ptp configs through skel's ADD path and ptp's loader: a refused
// config is a config error (never 999), an accepted one has IPAM and a valid MTU, and
// written back out it loads to the same settings.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"mynet","type":"ptp","ipMasq":true,"mtu":1400,` +
			`"ipam":{"type":"host-local","subnet":"10.1.1.0/24"},"dns":{"nameservers":["10.1.1.1","8.8.8.8"]}}`,
		`{"cniVersion":"0.3.1","name":"p","type":"ptp","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.1.0/24"}],[{"subnet":"fd00::/64"}]]}}`,
		`{"cniVersion":"1.0.0","name":"p","type":"ptp","ipMasqIPv4":true,"ipMasqIPv6":false,"ipMasqBackend":"nftables","ipam":{"type":"static"}}`,
		`{"cniVersion":"1.0.0","name":"p","type":"ptp","ipMasq":true,"ipMasqBackend":"iptables","ipam":{"type":"dhcp"}}`,
		`{"cniVersion":"1.1.0","name":"p","type":"ptp","ipam":{}}`,
		`{"cniVersion":"1.1.0","name":"p","type":"ptp","mtu":20,"ipam":{"type":"host-local"}}`,
		`{"cniVersion":"1.1.0","name":"p","type":"ptp","ipMasq":true,"ipMasqBackend":"ebtables","ipam":{"type":"host-local"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(""), config, loadForAdd)
		if !ok {
			return
		}
		if l.Req.Net.IPAM.Type == "" {
			t.Fatalf("accepted a config without ipam.type")
		}
		if mtu := l.Value.Conf.MTU; mtu != 0 && (mtu < minMTU || mtu > maxMTU) {
			t.Fatalf("accepted mtu %d", mtu)
		}
		skeltest.RequireStable(t, Plugin(), l, l.Value.Conf, loadForAdd)
	})
}
