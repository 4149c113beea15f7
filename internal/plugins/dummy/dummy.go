// Package dummy is the dummy plugin: it gives the container a dummy interface, a link
// that leads nowhere but holds addresses (for a service address, or a container that
// must see an interface with its IP). ADD creates the link inside the container and
// configures the addresses IPAM gives; DEL releases them and deletes the link; CHECK
// verifies the link, addresses and routes; GC and STATUS ask IPAM. It is the smallest
// member of the one-link skeleton (onelink): the model for a new one.
package dummy

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the dummy plugin's registry entry.
func Plugin() *skel.Plugin {
	return onelink.Plugin(onelink.Member[struct{}]{
		Name:  "dummy",
		About: "gives containers a dummy interface holding IPAM's addresses",
		// dummy has no keys of its own: its config is the empty struct.
		Load: func(req *skel.Request) (struct{}, error) { return struct{}{}, load(req) },
		Link: onelink.InContainer[struct{}]{Create: create, Verify: verify},
	})
}

// load checks the config: dummy has no keys of its own, but an interface without
// addresses would carry nothing, so IPAM is required, as in the reference.
func load(req *skel.Request) error {
	skel.WarnUnknownKeys[struct{}](req) // no keys of its own: any beyond the spec's is unknown
	if req.Net.IPAM.Type == "" {
		return cnierror.New(cnierror.CodeInvalidConfig, "ipam: type is required: dummy configures the addresses IPAM gives")
	}
	return nil
}

// create makes the dummy: it has no parent, so it is made inside the container itself.
func create(req *skel.Request, _ struct{}, cont *link.NS) (func() error, error) {
	if _, err := link.CreateChild(cont, cont, &netlink.Dummy{}, req.Args.IfName); err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	return func() error { return cont.Delete(req.Args.IfName) }, nil
}

func verify(_ struct{}, _ *link.NS, l netlink.Link) error {
	if _, ok := l.(*netlink.Dummy); !ok {
		return fmt.Errorf("is a %s, not a dummy", l.Type())
	}
	return nil
}
