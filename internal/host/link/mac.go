package link

import (
	"bytes"
	"net"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// MACSource is one place a container's MAC address may be given (a config key,
// CNI_ARGS MAC, the mac capability), named as errors name it.
type MACSource struct {
	Field, Value string
}

// ContainerMAC returns the MAC of the last source that gives one (the plugins list them
// in the reference's order, the one that wins last), or nil when none does. A value
// that is not a unicast Ethernet address (or is all zeros) is code 7 naming its field.
func ContainerMAC(sources ...MACSource) (net.HardwareAddr, error) {
	var chosen MACSource
	for _, s := range sources {
		if s.Value != "" {
			chosen = s
		}
	}
	if chosen.Value == "" {
		return nil, nil
	}
	hw, err := net.ParseMAC(chosen.Value)
	switch {
	case err != nil || len(hw) != 6:
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %q is not an Ethernet MAC address", chosen.Field, chosen.Value)
	case hw[0]&1 != 0:
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %q is a multicast address", chosen.Field, chosen.Value)
	case bytes.Equal(hw, make(net.HardwareAddr, 6)):
		// The kernel refuses it with a bare "cannot assign requested address".
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %q is the all-zero address, which no interface may have", chosen.Field, chosen.Value)
	}
	return hw, nil
}
