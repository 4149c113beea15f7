package link_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func addrsOf(ips []result.IPConfig) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.Address.String())
	}
	return out
}

// The kernel is asked only when prevResult gives the interface no address, and then
// answers with its global addresses, IPv4 first: no link-local or host-scoped one.
func TestContainerIPsFallBackToTheKernelsGlobalAddresses(t *testing.T) {
	t.Parallel()
	hostNS, contNS, _, _ := pair(t)
	testns.Veth(t, hostNS, "h0", nil, contNS, "eth0",
		[]string{"fd00:5::2/64", "10.5.0.2/24", "10.5.0.3/24", "fe80::99/64", "127.0.0.9/8"})
	idx := 0
	prev := &result.Result{
		Interfaces: []result.Interface{{Name: "eth0", Sandbox: contNS.Path}},
		IPs:        []result.IPConfig{{Interface: &idx, Address: netip.MustParsePrefix("10.7.0.2/24")}},
	}
	ips, err := link.ContainerIPs("/nonexistent", "eth0", prev)
	require.NoError(t, err, "prevResult's addresses need no netns")
	assert.Equal(t, []string{"10.7.0.2/24"}, addrsOf(ips))

	prev.Interfaces[0].Name = "net1"
	ips, err = link.ContainerIPs(contNS.Path, "eth0", prev)
	require.NoError(t, err)
	assert.Equal(t, []string{"10.5.0.2/24", "10.5.0.3/24", "fd00:5::2/64"}, addrsOf(ips))

	_, err = link.ContainerIPs(contNS.Path, "eth9", prev)
	assert.ErrorContains(t, err, `link "eth9"`)
	_, err = link.ContainerIPs(t.TempDir()+"/gone", "eth0", prev)
	assert.Equal(t, cnierror.CodeUnknownContainer, cnierror.Code(err), "%v", err)
}
