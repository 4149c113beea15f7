package link_test

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/result"
)

// v6WithGateway is a result giving eth0 one IPv6 address and gateway, which makes
// ConfigureIface wait for duplicate address detection.
func v6WithGateway(addr string) *result.Result {
	idx := 0
	return &result.Result{CNIVersion: "1.1.0", Interfaces: []result.Interface{{Name: "eth0"}},
		IPs: []result.IPConfig{{Interface: &idx, Address: netip.MustParsePrefix(addr), Gateway: netip.MustParseAddr("fd00:7::1")}}}
}

// An address another node on the link holds fails DAD, and ADD with it, in the
// reference's words (upstream #1168).
func TestConfigureIfaceFailsOnADuplicateIPv6Address(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	v, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	hh := hostNS.Handle(t)
	addr, err := netlink.ParseAddr("fd00:7::5/64")
	require.NoError(t, err)
	addr.Flags = syscall.IFA_F_NODAD
	require.NoError(t, hh.AddrAdd(v.Host, addr))
	contNS.Run(t, func() error { return sysctl.Set("net/ipv6/conf/eth0/accept_dad", "1") })

	err = link.ConfigureIface(cont, "eth0", v6WithGateway("fd00:7::5/64"))
	assert.EqualError(t, err, "link eth0 has address fd00:7::5 in DADFAILED state")
}

// On a link without carrier DAD never runs, so the addresses stay tentative: after the
// cap that is success, not an error (upstream #1207).
func TestConfigureIfaceOnALinkWithoutCarrierSucceedsAfterTheCap(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	v, err := link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	require.NoError(t, hostNS.Handle(t).LinkSetDown(v.Host), "no carrier for the container end")
	contNS.Run(t, func() error { return sysctl.Set("net/ipv6/conf/eth0/accept_dad", "1") })

	start := time.Now()
	require.NoError(t, link.ConfigureIface(cont, "eth0", v6WithGateway("fd00:7::6/64")))
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Second, "it waited for the cap")
	l, err := contNS.Handle(t).LinkByName("eth0")
	require.NoError(t, err)
	addrs, err := contNS.Handle(t).AddrList(l, netlink.FAMILY_V6)
	require.NoError(t, err)
	var tentative bool
	for _, a := range addrs {
		if a.IP.String() == "fd00:7::6" {
			tentative = a.Flags&syscall.IFA_F_TENTATIVE != 0
		}
	}
	assert.True(t, tentative, "the address is still tentative: DAD did not run")
}
