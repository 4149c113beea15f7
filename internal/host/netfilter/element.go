package netfilter

import (
	"encoding/binary"
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/host/nlconn"
)

// Element is one element of an nftables set or map, as the kernel holds it.
type Element struct {
	// Comment is the element's comment (the owner our plugins write), "" when none.
	Comment string
	// VerdictChain is the chain a verdict map's element jumps or goes to.
	VerdictChain string
}

// GetElement looks one element up by key in the calling thread's network namespace.
// It costs one netlink round trip whatever the set's size, where google/nftables can
// only list every element, so a CHECK stays as fast with 300 attachments as with 10.
// A missing element, set or table is an error for which IsNotExist is true.
func GetElement(family nftables.TableFamily, table, set string, key []byte) (Element, error) {
	req := nl.NewNetlinkRequest(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_GETSETELEM, 0)
	req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(family), Version: unix.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(unix.NFTA_SET_ELEM_LIST_TABLE, cString(table)))
	req.AddData(nl.NewRtAttr(unix.NFTA_SET_ELEM_LIST_SET, cString(set)))
	elements := nl.NewRtAttr(unix.NLA_F_NESTED|unix.NFTA_SET_ELEM_LIST_ELEMENTS, nil)
	elem := elements.AddRtAttr(unix.NLA_F_NESTED|unix.NFTA_LIST_ELEM, nil)
	elem.AddRtAttr(unix.NLA_F_NESTED|unix.NFTA_SET_ELEM_KEY, nil).AddRtAttr(unix.NFTA_DATA_VALUE, key)
	req.AddData(elements)

	msgs, err := nlconn.Execute(netns.None(), req, unix.NETLINK_NETFILTER, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWSETELEM)
	if err != nil {
		return Element{}, fmt.Errorf("nftables: get element of %s %s: %w", table, set, err)
	}
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		if e, ok := parseElementMessage(m[4:]); ok {
			return e, nil
		}
	}
	return Element{}, fmt.Errorf("nftables: get element of %s %s: %w", table, set, syscall.ENOENT)
}

// parseElementMessage reads the first element of a NEWSETELEM message's attributes.
func parseElementMessage(b []byte) (Element, bool) {
	list, ok := findAttr(b, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	if !ok {
		return Element{}, false
	}
	elem, ok := findAttr(list, unix.NFTA_LIST_ELEM)
	if !ok {
		return Element{}, false
	}
	var e Element
	if data, ok := findAttr(elem, unix.NFTA_SET_ELEM_DATA); ok {
		if verdict, ok := findAttr(data, unix.NFTA_DATA_VERDICT); ok {
			e.VerdictChain = VerdictChain(verdict)
		}
	}
	if udata, ok := findAttr(elem, unix.NFTA_SET_ELEM_USERDATA); ok {
		// An element's comment is stored like a rule's: libnftnl's tag 0 in user data.
		e.Comment, _ = userdata.GetString(udata, userdata.TypeComment)
	}
	return e, true
}

// VerdictChain returns the chain named in a verdict's netlink attributes
// (NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN), "" for a verdict without one. google/nftables
// hands a verdict map element's value back in this raw form.
func VerdictChain(attrs []byte) string {
	chain, _ := findAttr(attrs, unix.NFTA_VERDICT_CHAIN)
	return strings.TrimRight(string(chain), "\x00")
}

// findAttr returns the payload of the first netlink attribute of type typ in b.
func findAttr(b []byte, typ uint16) ([]byte, bool) {
	for len(b) >= unix.SizeofNlAttr {
		n := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if n < unix.SizeofNlAttr || n > len(b) {
			return nil, false
		}
		if t == typ {
			return b[unix.SizeofNlAttr:n], true
		}
		b = b[min((n+unix.NLA_ALIGNTO-1)&^(unix.NLA_ALIGNTO-1), len(b)):]
	}
	return nil, false
}

func cString(s string) []byte { return append([]byte(s), 0) }
