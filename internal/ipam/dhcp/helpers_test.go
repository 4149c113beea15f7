package dhcp_test

import (
	"net/netip"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/result"
)

func resultDefaultRoute() result.Route {
	return result.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr(dhcptest.ServerIP)}
}
