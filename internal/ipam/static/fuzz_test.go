package static

import (
	"testing"

	"github.com/cnikit/cni/internal/result/resulttest"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// FuzzLoad drives static configs (ipam.addresses, CNI_ARGS IP= and GATEWAY=,
// args.cni.ips, runtimeConfig.ips, routes and dns) through skel's ADD path and static's
// loader: a refused config is a config error (never 999), an accepted one yields
// printable addresses and routes, and written back out it loads to the same settings. The
// result ADD prints is read back by the next plugin as printed.
func FuzzLoad(f *testing.F) {
	for _, seed := range []struct{ config, cniArgs string }{
		{`{"cniVersion":"1.1.0","name":"n","type":"static","ipam":{"type":"static","addresses":[` +
			`{"address":"10.10.0.1/24","gateway":"10.10.0.254"},{"address":"3ffe:ffff:0:01ff::1/64","gateway":"3ffe:ffff:0::1"}],` +
			`"routes":[{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.10.5.1"},{"dst":"3ffe:ffff:0:01ff::1/64"}],` +
			`"dns":{"nameservers":["8.8.8.8"],"domain":"example.com","search":["example.com"]}}}`, ""},
		{`{"cniVersion":"0.3.1","name":"n","type":"static","ipam":{"type":"static"}}`, "IP=10.10.0.1/24,11.11.0.1/24;GATEWAY=10.10.0.254"},
		{`{"cniVersion":"1.0.0","name":"n","type":"static","ipam":{"type":"static"},"args":{"cni":{"ips":["10.10.0.1/24","fd00::1/64"]}}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"static","ipam":{"type":"static","addresses":[{"address":"10.0.0.2/8"}]},` +
			`"runtimeConfig":{"ips":[" 10.10.0.1/24 ","::ffff:10.1.0.1/120"]}}`, "IgnoreUnknown=true;K8S_POD_NAMESPACE=default"},
		{`{"cniVersion":"0.2.0","name":"n","type":"static","ipam":{"type":"static","addresses":[{"address":"10.0.0.2/8"},{"address":"10.0.0.3/8"}]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"static","ipam":{"type":"static","addresses":[{"address":"10.0.0.2"}]}}`, "GATEWAY=x"},
		{`{"cniVersion":"1.1.0","name":"n","type":"static","ipam":{"type":"static","addresses":[{"address":"fe80::5/64","gateway":"fe80::1%eth0"}]}}`, ""},
		{`{"cniVersion":"1.1.0","name":"n","type":"static"}`, ""},
	} {
		f.Add([]byte(seed.config), seed.cniArgs)
	}
	f.Fuzz(func(t *testing.T, config []byte, cniArgs string) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(cniArgs), config, loadConfig)
		if !ok {
			return
		}
		for _, ip := range l.Value.IPs {
			if !ip.Address.IsValid() || ip.Address.Addr().Is4In6() || ip.Address.Addr().Zone() != "" {
				t.Fatalf("accepted address %v", ip.Address)
			}
		}
		res, err := add(l.Req)
		if err != nil {
			t.Fatalf("ADD of an accepted config: %v", err)
		}
		if res.CNIVersion == "" {
			res.CNIVersion = "0.1.0" // what skel fills in for a config without cniVersion
		}
		resulttest.RequireRoundTrips(t, res)
		raw, err := skel.LoadConfig[netJSON](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, Plugin(), l, raw, loadConfig)
	})
}
