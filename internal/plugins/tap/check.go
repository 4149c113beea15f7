package tap

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
)

// verifyTap is CHECK's test of the link called CNI_IFNAME in the container: a tap with
// the MAC, MTU, queue mode, owner, group and bridge asked for; the skeleton checks the
// IPAM reservation and the addresses and routes.
func verifyTap(c *Config, cont *link.NS, l netlink.Link) error {
	name := l.Attrs().Name
	t, ok := l.(*netlink.Tuntap)
	if !ok || t.Mode != netlink.TUNTAP_MODE_TAP {
		return fmt.Errorf("container %s: a %s, not a tap", name, l.Type())
	}
	switch {
	case c.mac != nil && t.HardwareAddr.String() != c.mac.String():
		return fmt.Errorf("tap %s: MAC %s, config says %s", name, t.HardwareAddr, c.mac)
	case c.MTU != 0 && t.MTU != c.MTU:
		return fmt.Errorf("tap %s: MTU %d, config says %d", name, t.MTU, c.MTU)
	case c.MultiQueue != (t.Flags&netlink.TUNTAP_MULTI_QUEUE != 0):
		return fmt.Errorf("tap %s: multi-queue is %v, config says %v", name, !c.MultiQueue, c.MultiQueue)
	case c.Owner != nil && t.Owner != *c.Owner:
		return fmt.Errorf("tap %s: owner %d, config says %d", name, t.Owner, *c.Owner)
	case c.Group != nil && t.Group != *c.Group:
		return fmt.Errorf("tap %s: group %d, config says %d", name, t.Group, *c.Group)
	}
	if c.Bridge == "" {
		return nil
	}
	br, err := findBridge(cont, c.Bridge)
	if err != nil {
		return err
	}
	if t.MasterIndex != br.Attrs().Index {
		return fmt.Errorf("tap %s: not enslaved to bridge %s", name, c.Bridge)
	}
	return nil
}
