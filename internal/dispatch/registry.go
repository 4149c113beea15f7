package dispatch

import (
	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/ipam/static"
	"github.com/cnikit/cni/internal/plugins/bandwidth"
	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/plugins/firewall"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/plugins/loopback"
	"github.com/cnikit/cni/internal/plugins/portmap"
	"github.com/cnikit/cni/internal/plugins/ptp"
	"github.com/cnikit/cni/internal/plugins/sbr"
	"github.com/cnikit/cni/internal/plugins/tuning"
	"github.com/cnikit/cni/internal/plugins/vrf"
	"github.com/cnikit/cni/internal/skel"
)

// Registry returns every built-in plugin, one line each. `cni --list`, help, the install
// script and in-process lookups all read this one table.
func Registry() []*skel.Plugin {
	return []*skel.Plugin{
		loopback.Plugin(),
		hostlocal.Plugin(),
		static.Plugin(),
		bandwidth.Plugin(),
		bridge.Plugin(),
		ptp.Plugin(),
		portmap.Plugin(),
		tuning.Plugin(),
		firewall.Plugin(),
		sbr.Plugin(),
		vrf.Plugin(),
		flannel.New(Lookup),
		chain.Plugin(Lookup),
	}
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
