package portmap

import (
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/cnikit/cni/internal/sha2"
)

// owner names one attachment the way portmap keys its state: network name plus
// container id (not the interface: the reference keyed it so, and chain names built
// from it are an operator-visible API).
type owner struct {
	net string
	cid string
}

// hash is the 21 hex digits of sha512(network+containerID) that the reference puts
// after "CNI-DN-" (its chain names are cut to 28 characters).
func (o owner) hash() string {
	sum := sha2.Sum512([]byte(o.net + o.cid))
	return hex.EncodeToString(sum[:])[:21]
}

// comment is the reference's ownership comment of the DNAT entry rules; the nftables
// backend tags its rules and map elements with it as well.
func (o owner) comment() string {
	return fmt.Sprintf("dnat name: %q id: %q", o.net, o.cid)
}

// ownerFromComment parses comment(); ok is false for anything else. Network names and
// container ids cannot hold quotes or backslashes, so %q reads what the reference wrote.
func ownerFromComment(c string) (owner, bool) {
	var o owner
	n, err := fmt.Sscanf(c, "dnat name: %q id: %q", &o.net, &o.cid)
	return o, err == nil && n == 2
}

// family is what one address family of an attachment needs: the container's address
// (with its prefix length, which the iptables hairpin rule uses) and the mappings
// that apply in this family.
type family struct {
	v6       bool
	addr     netip.Prefix
	mappings []mapping
	conds    []string
}

// families splits the mappings by family; a family without a container address or
// without mappings is left out.
func (s *settings) families(v4, v6 netip.Prefix) []family {
	var out []family
	for _, f := range []family{{v6: false, addr: v4, conds: s.cond4}, {v6: true, addr: v6, conds: s.cond6}} {
		if !f.addr.IsValid() {
			continue
		}
		for _, m := range s.mappings {
			if m.inFamily(f.v6) {
				f.mappings = append(f.mappings, m)
			}
		}
		if len(f.mappings) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// flow is a mapping as installed, recovered from the kernel at DEL so that the
// attachment's conntrack entries can go too.
type flow struct {
	proto    string
	hostPort uint16
	target   netip.Addr
}
