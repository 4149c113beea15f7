package result

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContainerIPsAreTheInterfacesAndTheUnnamedOnes(t *testing.T) {
	at := func(i int) *int { return &i }
	ip := func(addr string, iface *int) IPConfig {
		return IPConfig{Address: netip.MustParsePrefix(addr), Interface: iface}
	}
	inSandbox := Interface{Name: "eth0", Sandbox: "/run/netns/c"}
	tests := []struct {
		name string
		r    Result
		want []string
	}{
		{"on the sandboxed interface", Result{
			Interfaces: []Interface{{Name: "br0"}, {Name: "veth0"}, inSandbox},
			IPs:        []IPConfig{ip("10.0.0.2/24", at(2)), ip("fd00::2/64", at(2))},
		}, []string{"10.0.0.2/24", "fd00::2/64"}},
		{"no index (Calico, IPAM)", Result{
			Interfaces: []Interface{{Name: "cali1"}},
			IPs:        []IPConfig{ip("10.0.0.2/32", nil)},
		}, []string{"10.0.0.2/32"}},
		{"an index out of range counts as none", Result{
			Interfaces: []Interface{inSandbox},
			IPs:        []IPConfig{ip("10.0.0.2/24", at(3)), ip("10.0.0.3/24", at(-1))},
		}, []string{"10.0.0.2/24", "10.0.0.3/24"}},
		{"another interface's are not", Result{
			Interfaces: []Interface{{Name: "veth0"}, {Name: "net1", Sandbox: "/run/netns/c"}, inSandbox},
			IPs:        []IPConfig{ip("10.9.0.2/24", at(0)), ip("10.8.0.2/24", at(1)), ip("10.0.0.2/24", at(2))},
		}, []string{"10.0.0.2/24"}},
		{"a sandbox-less interface of that name comes last", Result{
			Interfaces: []Interface{{Name: "eth0"}},
			IPs:        []IPConfig{ip("10.0.0.9/24", at(0)), ip("10.0.0.2/24", nil)},
		}, []string{"10.0.0.2/24", "10.0.0.9/24"}},
		{"none", Result{Interfaces: []Interface{inSandbox}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range tc.r.ContainerIPs("eth0") {
				got = append(got, c.Address.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
