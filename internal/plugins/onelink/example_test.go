package onelink_test

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/plugins/onelink"
	"github.com/cnikit/cni/internal/spec/skel"
)

// exampleConfig is a member's config: its own keys, beyond the spec's.
type exampleConfig struct {
	Master string `json:"master"`
	MTU    int    `json:"mtu"`
}

// A member whose link is a macvlan child of the configured master: the skeleton does
// the rest of ADD, CHECK, DEL, GC and STATUS.
func ExamplePlugin() {
	p := onelink.Plugin(onelink.Member[*exampleConfig]{
		Name:  "example",
		About: "gives containers a macvlan on the configured master",
		Load: func(req *skel.Request) (*exampleConfig, error) {
			c, err := skel.LoadConfig[exampleConfig](req)
			if err != nil {
				return nil, err
			}
			if err := attachment.ValidateMTU(c.MTU); err != nil {
				return nil, err
			}
			return c, nil
		},
		Link: onelink.OnMaster[*exampleConfig]{
			Child: func(c *exampleConfig) attachment.Child {
				return attachment.Child{Kind: "macvlan", Master: c.Master, MTU: c.MTU,
					Make: func(m *attachment.Master) netlink.Link {
						return &netlink.Macvlan{LinkAttrs: attachment.ChildAttrs(m, c.MTU), Mode: netlink.MACVLAN_MODE_BRIDGE}
					}}
			},
			Verify: func(_ *exampleConfig, l netlink.Link) error {
				if _, ok := l.(*netlink.Macvlan); !ok {
					return fmt.Errorf("is a %s, not a macvlan", l.Type())
				}
				return nil
			},
		},
	})
	fmt.Println(p.Name, p.Add != nil, p.Del != nil, p.Check != nil, p.GC != nil, p.Status != nil)
	// Output: example true true true true true
}
