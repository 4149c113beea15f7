package onelink

import (
	"net"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/spec/skel"
)

// ContainerMAC is the MAC a member gives its link, from the config's mac, CNI_ARGS MAC=
// and runtimeConfig.mac (the mac capability), later ones winning, as in the reference;
// nil lets the kernel choose. CNI_ARGS may hold only the keys in known.
func ContainerMAC(cniArgs, mac, runtimeMAC string, known ...string) (net.HardwareAddr, error) {
	args, err := skel.ParseCNIArgs(cniArgs, known...)
	if err != nil {
		return nil, err
	}
	return link.ContainerMAC(link.MACSource{Field: "mac", Value: mac},
		link.MACSource{Field: "CNI_ARGS MAC", Value: args["MAC"]},
		link.MACSource{Field: "runtimeConfig.mac", Value: runtimeMAC})
}
