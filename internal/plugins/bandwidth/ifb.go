package bandwidth

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/link"
)

// ifbName is the reference's name for an attachment's ifb: "bwp" and the first 12 hex
// digits of sha512(network name + container id), 15 bytes in all.
func ifbName(network, containerID string) string {
	sum := sha512.Sum512([]byte(network + containerID))
	return "bwp" + hex.EncodeToString(sum[:])[:12]
}

// maxAlias is IFALIASZ minus the terminating NUL.
const maxAlias = 255

// ownerPrefix is how an ifb's alias starts when this network made it. GC finds its
// own ifbs by it, so that two networks on one node never collect each other's.
func ownerPrefix(network string) string {
	tag := network
	if len(tag) > 128 {
		// Keep room for the container id under IFALIASZ; the hash still tells networks apart.
		sum := sha512.Sum512([]byte(network))
		tag = "sha512:" + hex.EncodeToString(sum[:16])
	}
	return "cni-bandwidth net=" + tag + " id="
}

// ownerAlias records the network and container that own an ifb. A container id too long
// for IFALIASZ is cut: GC decides by the ifb name, which the full id determines.
func ownerAlias(network, containerID string) string {
	a := ownerPrefix(network) + containerID
	if len(a) > maxAlias {
		a = a[:maxAlias]
	}
	return a
}

// createIfb makes the attachment's ifb with the host veth's MTU, records its owner in
// the alias and sets it up. An ifb of the same name left by an earlier ADD of the same
// attachment is replaced; one owned by anybody else is an error.
func createIfb(host *link.NS, name, alias string, mtu int) (netlink.Link, error) {
	h, err := host.Handle()
	if err != nil {
		return nil, err
	}
	if old, err := h.LinkByName(name); err == nil {
		if old.Type() != "ifb" || old.Attrs().Alias != alias {
			return nil, fmt.Errorf("ifb %q: name taken by a %s with alias %q", name, old.Type(), old.Attrs().Alias)
		}
		if err := h.LinkDel(old); err != nil && !link.IsNotFound(err) {
			return nil, fmt.Errorf("ifb %q: delete stale: %w", name, err)
		}
	} else if !link.IsNotFound(err) {
		return nil, fmt.Errorf("ifb %q: %w", name, err)
	}
	ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}}
	if err := h.LinkAdd(ifb); err != nil {
		return nil, fmt.Errorf("ifb %q: create: %w", name, err)
	}
	l, err := h.LinkByName(name)
	if err == nil {
		err = h.LinkSetAlias(l, alias)
	}
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err == nil {
		l, err = h.LinkByName(name)
	}
	if err != nil {
		_ = host.Delete(name)
		return nil, fmt.Errorf("ifb %q: set up: %w", name, err)
	}
	return l, nil
}

// deleteIfb removes the attachment's ifb; one that does not exist is already deleted.
// A link of that name that is not an ifb is left alone.
func deleteIfb(host *link.NS, name string) error {
	l, err := host.ByName(name)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if l.Type() != "ifb" {
		return nil
	}
	return host.Delete(name)
}

// staleIfbs lists the ifbs this network owns whose attachment is not in keep (a set of
// ifb names).
func staleIfbs(host *link.NS, network string, keep map[string]bool) ([]string, error) {
	h, err := host.Handle()
	if err != nil {
		return nil, err
	}
	var links []netlink.Link
	for range 5 {
		links, err = h.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	prefix := ownerPrefix(network)
	var stale []string
	for _, l := range links {
		a := l.Attrs()
		if l.Type() == "ifb" && strings.HasPrefix(a.Alias, prefix) && !keep[a.Name] {
			stale = append(stale, a.Name)
		}
	}
	return stale, nil
}
