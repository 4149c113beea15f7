package dispatch

import (
	"slices"

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

// builtin is one line of the registry: a plugin's name, and the function that makes its
// entry (whose Name is that name). A plugin exec'd under its name makes only its own
// entry, not every plugin's (TestRegistryNamesAreTheirPluginsNames).
type builtin struct {
	name   string
	plugin func() *skel.Plugin
}

// builtins is the registry, one line per plugin: `cni --list`, help, the install script
// and in-process lookups all read this one table.
func builtins() []builtin {
	// The IPAM types come from ipam's own table, which in-process delegation reads too.
	types := ipam.Types()
	out := make([]builtin, 0, len(types)+17)
	for _, t := range types {
		out = append(out, builtin{t.Name, t.Plugin})
	}
	return append(out,
		builtin{"loopback", loopback.Plugin},
		builtin{"bandwidth", bandwidth.Plugin},
		builtin{"bridge", bridge.Plugin},
		builtin{"ptp", ptp.Plugin},
		builtin{"portmap", portmap.Plugin},
		builtin{"tuning", tuning.Plugin},
		builtin{"firewall", firewall.Plugin},
		builtin{"sbr", sbr.Plugin},
		builtin{"vrf", vrf.Plugin},
		builtin{"flannel", func() *skel.Plugin { return flannel.New(Lookup) }},
		builtin{"macvlan", macvlan.Plugin},
		builtin{"ipvlan", ipvlan.Plugin},
		builtin{"vlan", vlan.Plugin},
		builtin{"dummy", dummy.Plugin},
		builtin{"host-device", hostdevice.Plugin},
		builtin{"tap", tap.Plugin},
		builtin{"chain", func() *skel.Plugin { return chain.Plugin(Lookup) }},
	)
}

// Registry returns every built-in plugin's entry, in the table's order.
func Registry() []*skel.Plugin {
	table := builtins()
	out := make([]*skel.Plugin, len(table))
	for i, b := range table {
		out[i] = b.plugin()
	}
	return out
}

// Lookup returns the built-in plugin called name, or nil.
func Lookup(name string) *skel.Plugin {
	table := builtins()
	if i := slices.IndexFunc(table, func(b builtin) bool { return b.name == name }); i >= 0 {
		return table[i].plugin()
	}
	return nil
}
