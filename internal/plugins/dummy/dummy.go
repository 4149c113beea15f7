// Package dummy is the dummy plugin: it gives the container a dummy interface, a link
// that leads nowhere but holds addresses (for a service address, or a container that
// must see an interface with its IP). ADD creates the link inside the container and
// configures the addresses IPAM gives; DEL releases them and deletes the link; CHECK
// verifies the link, addresses and routes; GC and STATUS ask IPAM.
package dummy

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the dummy plugin's registry entry.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:     "dummy",
		About:    "gives containers a dummy interface holding IPAM's addresses",
		Versions: version.All(),
		Add:      add,
		Del:      attachment.Del,
		Check:    check,
		GC:       attachment.GC,
		Status:   status,
	}
}

func add(req *skel.Request) (_ *result.Result, err error) {
	if err := load(req); err != nil {
		return nil, err
	}
	if err := attachment.CheckIPAM(req); err != nil {
		return nil, err
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return nil, err
	}
	defer cont.Close()

	var undo rollback.Stack
	defer undo.OnError(&err)

	// A dummy has no parent: it is made inside the container itself.
	if _, err := link.CreateChild(cont, cont, &netlink.Dummy{}, req.Args.IfName); err != nil {
		return nil, fmt.Errorf("dummy: %w", err)
	}
	undo.Push("dummy", func() error { return cont.Delete(req.Args.IfName) })
	addrs, err := attachment.AddIPAM(req, &undo)
	if err != nil {
		return nil, err
	}
	return attachment.Finish(req, cont, addrs, attachment.Options{})
}

func check(req *skel.Request) error {
	if err := load(req); err != nil {
		return err
	}
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	return attachment.Check(req, cont, func(l netlink.Link) error {
		if _, ok := l.(*netlink.Dummy); !ok {
			return fmt.Errorf("is a %s, not a dummy", l.Type())
		}
		return nil
	})
}

func status(req *skel.Request) error {
	if err := load(req); err != nil {
		return err
	}
	return attachment.Status(req)
}
