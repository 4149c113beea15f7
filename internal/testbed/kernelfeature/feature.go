// Package kernelfeature tells tests whether the running kernel supports a
// network feature (a link type, a bridge option) so that a test needing it
// skips with a reason on a kernel that lacks it, and fails instead in the
// full-kernel VM run (CNI_TEST_FULL_KERNEL=1), where every feature must exist.
//
// Support is probed by really creating the link inside a throwaway network
// namespace: config files and module lists lie, the kernel does not.
package kernelfeature

import "fmt"

// Feature is a kernel network capability a test may depend on.
type Feature int

// The features tests can ask for. Each is probed by creating one link of that
// kind in a throwaway namespace.
const (
	Dummy Feature = iota
	VLAN
	IPVLAN
	Macvlan
	VRF
	Bond
	BridgeVLANFiltering
	featureCount // keep last: sizes the memo table
)

var featureNames = [featureCount]string{
	Dummy:               "dummy links",
	VLAN:                "802.1Q vlan links",
	IPVLAN:              "ipvlan links",
	Macvlan:             "macvlan links",
	VRF:                 "vrf links",
	Bond:                "bond links",
	BridgeVLANFiltering: "bridge vlan_filtering",
}

// String names the feature the way a skip message should.
func (f Feature) String() string {
	if f < 0 || f >= featureCount {
		return fmt.Sprintf("Feature(%d)", int(f))
	}
	return featureNames[f]
}
