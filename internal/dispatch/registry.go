package dispatch

import (
	"sync"

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
	"github.com/cnikit/cni/internal/skel"
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

// Lookup returns the built-in plugin called name, or nil. It scans a table built on its
// first call: a chain looks up every child, and building the registry makes some twenty
// plugin values. A plain plugin exec builds it once, at its one lookup, as before. Each
// call returns a copy of its own, so no caller changes the table.
func Lookup(name string) *skel.Plugin {
	table.once.Do(func() { table.plugins = Registry() })
	for _, p := range table.plugins {
		if p.Name == name {
			cp := *p
			return &cp
		}
	}
	return nil
}

// table is the registry as Lookup scans it: written once under its sync.Once, then
// only read. Plugin values hold no state, so sharing them is safe. (A sync.OnceValue
// initializer would make an initialization cycle: the registry holds Lookup.)
var table struct {
	once    sync.Once
	plugins []*skel.Plugin
}
