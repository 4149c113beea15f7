package static

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

type obj = map[string]any

func invoke(t *testing.T, cmd, version string, conf obj, cniArgs string) (*result.Result, error) {
	t.Helper()
	conf["cniVersion"] = version
	conf["name"] = "static-net"
	conf["type"] = "bridge"
	if ipam, ok := conf["ipam"].(obj); ok {
		ipam["type"] = "static"
	}
	b, err := json.Marshal(conf)
	require.NoError(t, err)
	args := skel.Args{Command: cmd, ContainerID: "c1", IfName: "eth0", Netns: "/var/run/netns/absent",
		CNIArgs: cniArgs, Path: []string{"/nonexistent"}}
	return skel.Invoke(context.Background(), Plugin(), args, b, nil)
}

func addrs(res *result.Result) []string {
	var out []string
	for _, ip := range res.IPs {
		s := ip.Address.String()
		if ip.Gateway.IsValid() {
			s += " gw " + ip.Gateway.String()
		}
		out = append(out, s)
	}
	return out
}

// addCase is one ADD of static: conf as version (empty: 1.1.0) with CNI_ARGS cniArgs, and
// the addresses it returns or, when wantErr is set, what its invalid-config error names.
type addCase struct {
	name    string
	version string
	conf    obj
	cniArgs string
	want    []string
	wantErr string
}

// runAdds runs each case's ADD as a subtest.
func runAdds(t *testing.T, cases []addCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := cmp.Or(tc.version, "1.1.0")
			res, err := invoke(t, skel.CmdAdd, v, tc.conf, tc.cniArgs)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, v, res.CNIVersion)
			assert.Equal(t, tc.want, addrs(res))
		})
	}
}

func TestAddReturnsTheConfiguredAddresses(t *testing.T) {
	runAdds(t, []addCase{
		{name: "addresses with gateways", conf: obj{"ipam": obj{"addresses": []obj{
			{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}, {"address": "fd00::5/64"}}}},
			want: []string{"10.10.0.5/24 gw 10.10.0.1", "fd00::5/64"}},
		{name: "CNI_ARGS IP and GATEWAY are appended", conf: obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.5/24"}}}},
			cniArgs: "IP=10.20.0.5/24,fd00::9/64;GATEWAY=10.20.0.1,fd00::1",
			want:    []string{"10.10.0.5/24", "10.20.0.5/24 gw 10.20.0.1", "fd00::9/64 gw fd00::1"}},
		{name: "args.cni.ips replace", conf: obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.5/24"}}},
			"args": obj{"cni": obj{"ips": []string{"10.30.0.5/16"}}}},
			want: []string{"10.30.0.5/16"}},
		{name: "ips capability replaces everything", conf: obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.5/24"}}},
			"args": obj{"cni": obj{"ips": []string{"10.30.0.5/16"}}}, "runtimeConfig": obj{"ips": []string{"10.40.0.5/24"}}},
			want: []string{"10.40.0.5/24"}},
		{name: "0.2.0 with one address per family", version: "0.2.0", conf: obj{"ipam": obj{"addresses": []obj{
			{"address": "10.10.0.5/24"}, {"address": "fd00::5/64"}}}},
			want: []string{"10.10.0.5/24", "fd00::5/64"}},
	})
}

func TestAddReturnsRoutesAndDNS(t *testing.T) {
	res, err := invoke(t, skel.CmdAdd, "1.1.0", obj{"ipam": obj{
		"addresses": []obj{{"address": "10.10.0.5/24"}},
		"routes":    []obj{{"dst": "0.0.0.0/0", "gw": "10.10.0.1"}, {"dst": "192.168.0.0/16", "priority": 5}},
		"dns":       obj{"nameservers": []string{"10.10.0.53"}, "domain": "example.org", "search": []string{"example.org"}},
	}}, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"10.10.0.5/24"}, addrs(res))
	require.Len(t, res.Routes, 2)
	assert.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
	assert.Equal(t, "10.10.0.1", res.Routes[0].GW.String())
	assert.Equal(t, "192.168.0.0/16", res.Routes[1].Dst.String())
	assert.False(t, res.Routes[1].GW.IsValid(), "a route without gw stays without one")
	assert.Equal(t, 5, res.Routes[1].Priority)
	assert.Equal(t, []string{"10.10.0.53"}, res.DNS.Nameservers)
	assert.Equal(t, "example.org", res.DNS.Domain)
	assert.Equal(t, []string{"example.org"}, res.DNS.Search)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	runAdds(t, []addCase{
		{name: "no ipam", conf: obj{}, wantErr: "missing 'ipam' key"},
		{name: "bad address", conf: obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.5/24"}, {"address": "10.10.0.6"}}}},
			wantErr: `ipam.addresses[1].address: invalid CIDR "10.10.0.6"`},
		{name: "bad gateway", conf: obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.5/24", "gateway": "nope"}}}},
			wantErr: `ipam.addresses[0].gateway: invalid IP address "nope"`},
		{name: "bad route", conf: obj{"ipam": obj{"routes": []obj{{"dst": "x"}}}}, wantErr: `ipam.routes[0].dst: invalid CIDR "x"`},
		{name: "bad CNI_ARGS IP", conf: obj{"ipam": obj{}}, cniArgs: "IP=10.1.1.1", wantErr: `CNI_ARGS IP[0]: invalid CIDR "10.1.1.1"`},
		{name: "bad CNI_ARGS GATEWAY", conf: obj{"ipam": obj{}}, cniArgs: "IP=10.1.1.1/24;GATEWAY=x", wantErr: "CNI_ARGS GATEWAY"},
		{name: "bad args ips", conf: obj{"ipam": obj{}, "args": obj{"cni": obj{"ips": []string{"1.2.3.4"}}}},
			wantErr: `args.cni.ips[0]: invalid CIDR "1.2.3.4"`},
		{name: "bad ips capability", conf: obj{"ipam": obj{}, "runtimeConfig": obj{"ips": []string{"x"}}},
			wantErr: `runtimeConfig.ips[0]: invalid CIDR "x"`},
		{name: "0.2.0 with two v4 addresses", version: "0.2.0", conf: obj{"ipam": obj{"addresses": []obj{
			{"address": "10.10.0.5/24"}, {"address": "10.10.0.6/24"}}}},
			wantErr: "does not support more than 1 address per family"},
	})
}

func TestCheckComparesWithPrevResult(t *testing.T) {
	ipam := obj{"addresses": []obj{{"address": "10.10.0.5/24", "gateway": "10.10.0.1"}}}
	prev := func(addr, gw string) obj {
		return obj{"cniVersion": "1.1.0", "ips": []obj{{"address": addr, "gateway": gw}}}
	}
	_, err := invoke(t, skel.CmdCheck, "1.1.0", obj{"ipam": ipam, "prevResult": prev("10.10.0.5/24", "10.10.0.1")}, "")
	require.NoError(t, err)
	_, err = invoke(t, skel.CmdCheck, "1.1.0", obj{"ipam": ipam, "prevResult": prev("10.10.0.6/24", "10.10.0.1")}, "")
	require.ErrorContains(t, err, "failed to find address 10.10.0.5/24")
	_, err = invoke(t, skel.CmdCheck, "1.1.0", obj{"ipam": ipam, "prevResult": prev("10.10.0.5/24", "10.10.0.254")}, "")
	require.ErrorContains(t, err, "failed to find address")
	_, err = invoke(t, skel.CmdCheck, "1.1.0", obj{"ipam": ipam}, "")
	require.ErrorContains(t, err, "prevResult")
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "a missing prevResult is a config error")
}

func TestDelKeepsNoStateAndSucceeds(t *testing.T) {
	_, err := invoke(t, skel.CmdDel, "1.1.0", obj{"ipam": obj{}}, "")
	require.NoError(t, err)
	// Like the reference plugin, DEL has nothing to release and reads no config: it
	// succeeds even for one that ADD would refuse.
	_, err = invoke(t, skel.CmdDel, "1.1.0", obj{"ipam": obj{"addresses": []obj{{"address": "10.10.0.6"}}}}, "")
	assert.NoError(t, err)
}
