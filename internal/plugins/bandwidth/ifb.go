package bandwidth

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/nlconn"
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

// owner is the attachment an ifb serves: one interface of one container on one network.
type owner struct{ network, containerID, ifName string }

// alias records the owner in the ifb's alias: "cni-bandwidth net=<net> id=<cid>
// if=<ifname>". The ifb name only tells container and network apart, so the interface
// is what keeps one attachment from taking over another interface's ifb. A container id
// too long for IFALIASZ is cut, not the interface: GC decides by the ifb name, which the
// full id determines, and by the interface.
func (o owner) alias() string {
	prefix, suffix := ownerPrefix(o.network), " if="+o.ifName
	id := o.containerID[:min(len(o.containerID), maxAlias-len(prefix)-len(suffix))]
	return prefix + id + suffix
}

// legacyAlias is the alias our earlier versions gave an ifb, without the interface.
func (o owner) legacyAlias() string {
	a := ownerPrefix(o.network) + o.containerID
	return a[:min(len(a), maxAlias)]
}

// aliasIfName returns the interface an owner alias names; ok is false for an alias in
// the older format, which names none. Container ids and interface names hold no
// spaces, so the last " if=" is the field.
func aliasIfName(alias string) (ifName string, ok bool) {
	i := strings.LastIndex(alias, " if=")
	if i < 0 {
		return "", false
	}
	return alias[i+len(" if="):], true
}

// replaceable decides whether ADD may delete a link that holds the ifb's name: it may
// when the link is this attachment's own ifb left by an earlier ADD, or one our earlier
// version made for this container (its alias names no interface). Another interface of
// the same container is refused rather than replaced: its ingress filter redirects to
// that ifb, and the reference's name leaves room for one ifb per container and network.
func replaceable(l netlink.Link, o owner) error {
	a := l.Attrs().Alias
	if l.Type() == "ifb" {
		if a == o.alias() || a == o.legacyAlias() {
			return nil
		}
		if other, ok := aliasIfName(a); ok && a == (owner{o.network, o.containerID, other}).alias() {
			return cnierror.Newf(cnierror.CodeInvalidConfig,
				"ifb %q already shapes egress of interface %q of container %q on network %q; "+
					"there is one ifb per container and network, so %q cannot have an egress limit too",
				l.Attrs().Name, other, o.containerID, o.network, o.ifName)
		}
	}
	return cnierror.Newf(cnierror.CodeInvalidConfig, "ifb %q: name taken by a %s with alias %q",
		l.Attrs().Name, l.Type(), a)
}

// createIfb makes the attachment's ifb with the host veth's MTU, records its owner in
// the alias and sets it up. An ifb of the same name left by an earlier ADD of the same
// attachment (or by our earlier version for this container) is replaced; one owned by
// anybody else, another interface of this container included, is an error. The name
// is looked at only when the create finds it taken, so a first ADD does not ask.
func createIfb(host *link.NS, name string, o owner, mtu int) (netlink.Link, error) {
	h := host.Handle()
	// Created up: one message fewer under the RTNL, which every namespace's link
	// changes share. LinkAdd looks the new link's index up for the alias.
	ifb := &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu, Flags: net.FlagUp}}
	err := h.LinkAdd(ifb)
	if errors.Is(err, syscall.EEXIST) {
		if err := deleteStaleIfb(h, name, o); err != nil {
			return nil, err
		}
		err = h.LinkAdd(ifb)
	}
	if err != nil {
		return nil, fmt.Errorf("ifb %q: create: %w", name, err)
	}
	err = h.LinkSetAlias(ifb, o.alias())
	var l netlink.Link
	if err == nil {
		l, err = h.LinkByName(name)
	}
	if err != nil {
		_ = host.Delete(name)
		return nil, fmt.Errorf("ifb %q: set up: %w", name, err)
	}
	return l, nil
}

// deleteStaleIfb deletes the link that holds the ifb's name when replaceable says ADD
// may; one gone meanwhile is deleted already.
func deleteStaleIfb(h *nlconn.Handle, name string, o owner) error {
	old, err := h.LinkByName(name)
	if link.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ifb %q: %w", name, err)
	}
	if err := replaceable(old, o); err != nil {
		return err
	}
	if err := h.LinkDel(old); err != nil && !link.IsNotFound(err) {
		return fmt.Errorf("ifb %q: delete stale: %w", name, err)
	}
	return nil
}

// deleteIfb removes the attachment's ifb; one that does not exist is already deleted.
// A link of that name that is not an ifb, or an ifb whose alias names another
// interface, is left alone. An ifb with no interface in its alias (the reference's,
// which has no alias, or our earlier version's) is taken to be this attachment's. The
// deletion itself runs in the background of the process (link.NS.DeleteInBackground).
func deleteIfb(ctx context.Context, host *link.NS, name string, o owner) error {
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
	if a := l.Attrs().Alias; a != o.alias() {
		if _, named := aliasIfName(a); named {
			return nil
		}
	}
	return host.DeleteInBackground(ctx, name)
}

// staleIfbs lists the ifbs this network owns whose attachment is not in keep, which maps
// an ifb name to the valid interfaces of its container. An ifb whose alias names no
// interface (our earlier version's) is kept for any valid interface of its container.
func staleIfbs(host *link.NS, network string, keep map[string][]string) ([]string, error) {
	h := host.Handle()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	prefix := ownerPrefix(network)
	var stale []string
	for _, l := range links {
		a := l.Attrs()
		if l.Type() != "ifb" || !strings.HasPrefix(a.Alias, prefix) {
			continue
		}
		ifNames, valid := keep[a.Name]
		if ifName, named := aliasIfName(a.Alias); named && !slices.Contains(ifNames, ifName) {
			valid = false
		}
		if !valid {
			stale = append(stale, a.Name)
		}
	}
	return stale, nil
}
