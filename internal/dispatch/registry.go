package dispatch

import (
	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/ipam"
	"github.com/cnikit/cni/internal/plugins/bandwidth"
	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/plugins/dummy"
	"github.com/cnikit/cni/internal/plugins/firewall"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/plugins/hostdevice"
	"github.com/cnikit/cni/internal/plugins/ipvlan"
	"github.com/cnikit/cni/internal/plugins/loopback"
	"github.com/cnikit/cni/internal/plugins/macvlan"
	"github.com/cnikit/cni/internal/plugins/portmap"
	"github.com/cnikit/cni/internal/plugins/ptp"
	"github.com/cnikit/cni/internal/plugins/sbr"
	"github.com/cnikit/cni/internal/plugins/tap"
	"github.com/cnikit/cni/internal/plugins/tuning"
	"github.com/cnikit/cni/internal/plugins/vlan"
	"github.com/cnikit/cni/internal/plugins/vrf"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Registry returns every built-in plugin, one line each. `cni --list`, help, the install
// script and in-process lookups all read this one table.
func Registry() []*skel.Plugin {
	// The IPAM types come from ipam's own table, which in-process delegation reads too.
	return append(ipam.Plugins(),
		loopback.Plugin(),
		bandwidth.Plugin(),
		bridge.Plugin(),
		ptp.Plugin(),
		portmap.Plugin(),
		tuning.Plugin(),
		firewall.Plugin(),
		sbr.Plugin(),
		vrf.Plugin(),
		flannel.New(Lookup),
		macvlan.Plugin(),
		ipvlan.Plugin(),
		vlan.Plugin(),
		dummy.Plugin(),
		hostdevice.Plugin(),
		tap.Plugin(),
		chain.Plugin(Lookup),
	)
}

// Lookup returns the built-in plugin called name, or nil.
func Lookup(name string) *skel.Plugin {
	for _, p := range Registry() {
		if p.Name == name {
			return p
		}
	}
	return nil
}
