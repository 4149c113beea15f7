// Package onelink is the skeleton of the plugins that give a container one link of its
// own (macvlan, ipvlan, vlan, dummy, tap): it orders the steps they share, which are the
// attachment package's, around what each member alone knows. ADD loads the config,
// checks the IPAM section before anything is made, creates the link, asks IPAM for
// addresses, configures them and reports the interface, undoing every step when a later
// one fails. DEL releases the addresses and deletes the link without reading the
// member's config, so it succeeds whatever became of the config or the master. CHECK
// loads the config and verifies the link, its MAC, addresses and routes. GC and STATUS
// ask IPAM.
//
// A new member is a package with a Config type of its own keys, a load function that
// parses and validates it (skel.LoadConfig, then the member's rules; it must not look at
// the system: CHECK and STATUS run it too), a verify function for CHECK (is the link of
// the member's type, with the member's settings?), and a Plugin function:
//
//	func Plugin() *skel.Plugin {
//		return onelink.Plugin(onelink.Member[*Config]{
//			Name: "example", About: "gives containers an example interface",
//			Load: load,
//			Link: onelink.OnMaster[*Config]{Child: (*Config).child, Verify: verify},
//		})
//	}
//
// A child of a master (macvlan, ipvlan, vlan) is OnMaster: the member describes it as an
// attachment.Child (kind, master, MTU, the netlink.Link to create) and the skeleton finds
// the master, creates the link straight inside the container and, for CHECK, verifies
// the master too. A link without a master (dummy, tap) is InContainer: the member's
// Create makes CNI_IFNAME in the container and returns how to remove it.
// ExamplePlugin is a whole member that compiles; dummy is the smallest real one to copy.
// A member's tests run attachmenttest.Suite: what every one-link plugin does alike.
package onelink

import (
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Member is a one-link plugin: its registry name and description, how its config C is
// loaded, and how its link is made.
type Member[C any] struct {
	Name  string
	About string
	// Load parses and validates the config without looking at the system. ADD, CHECK
	// and STATUS run it; DEL and GC do not, so that a config that no longer validates
	// still cleans up.
	Load func(*skel.Request) (C, error)
	// Link is OnMaster or InContainer.
	Link Link[C]
}

// Link is how a member's link is made for ADD and verified for CHECK.
type Link[C any] interface {
	add(req *skel.Request, conf C, name string) (*result.Result, error)
	check(req *skel.Request, conf C) error
}

// Plugin returns m's registry entry.
func Plugin[C any](m Member[C]) *skel.Plugin {
	return &skel.Plugin{
		Name: m.Name, About: m.About, Versions: version.All(),
		Add: func(req *skel.Request) (*result.Result, error) {
			conf, err := m.Load(req)
			if err != nil {
				return nil, err
			}
			return m.Link.add(req, conf, m.Name)
		},
		Del: attachment.Del,
		Check: func(req *skel.Request) error {
			conf, err := m.Load(req)
			if err != nil {
				return err
			}
			return m.Link.check(req, conf)
		},
		GC: attachment.GC,
		Status: func(req *skel.Request) error {
			if _, err := m.Load(req); err != nil {
				return err
			}
			return attachment.Status(req)
		},
	}
}

// OnMaster is a link made as a child of a master, straight inside the container
// (attachment.Add); CHECK verifies that it still hangs off the master
// (attachment.CheckChild).
type OnMaster[C any] struct {
	// Child describes the link to create on the master.
	Child func(C) attachment.Child
	// Chained, when set, completes the child for ADD from the request: a chained ipvlan
	// takes its master and addresses from the prevResult. CHECK does not run it.
	Chained func(*skel.Request, C, attachment.Child) (attachment.Child, error)
	// Verify is CHECK's test of the link's type and the member's settings.
	Verify func(C, netlink.Link) error
}

// ValidateMaster checks the keys every OnMaster member's load checks alike: the master's
// name ("" passes: the skeleton finds one) and the MTU (0 is the master's).
func ValidateMaster(master string, mtu int) error {
	if err := attachment.ValidateMasterName(master); err != nil {
		return err
	}
	return attachment.ValidateMTU(mtu)
}

func (o OnMaster[C]) add(req *skel.Request, conf C, _ string) (*result.Result, error) {
	c := o.Child(conf)
	if o.Chained != nil {
		var err error
		if c, err = o.Chained(req, conf, c); err != nil {
			return nil, err
		}
	}
	return attachment.Add(req, c)
}

func (o OnMaster[C]) check(req *skel.Request, conf C) error {
	return attachment.CheckChild(req, o.Child(conf), func(l netlink.Link) error { return o.Verify(conf, l) })
}

// InContainer is a link without a master, made inside the container itself.
type InContainer[C any] struct {
	// Create makes the link CNI_IFNAME in cont and returns how to remove it, which runs
	// when a later step of ADD fails; also with an error, once the link exists.
	Create func(req *skel.Request, conf C, cont *link.NS) (remove func() error, err error)
	// Verify is CHECK's test of the link's type and the member's settings; cont is the
	// container's namespace, where the link lives.
	Verify func(conf C, cont *link.NS, l netlink.Link) error
}

func (in InContainer[C]) add(req *skel.Request, conf C, name string) (_ *result.Result, err error) {
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
	remove, err := in.Create(req, conf, cont)
	if remove != nil {
		undo.Push(name, remove)
	}
	if err != nil {
		return nil, err
	}
	addrs, err := attachment.AddIPAM(req, &undo)
	if err != nil {
		return nil, err
	}
	return attachment.Finish(req, cont, addrs, attachment.Options{})
}

func (in InContainer[C]) check(req *skel.Request, conf C) error {
	cont, err := link.OpenContainer(req.Context(), req.Args.Netns)
	if err != nil {
		return err
	}
	defer cont.Close()
	return attachment.Check(req, cont, func(l netlink.Link) error { return in.Verify(conf, cont, l) })
}
