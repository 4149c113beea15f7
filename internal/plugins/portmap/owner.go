package portmap

import (
	"crypto/sha512"
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/owner"
)

// attachment names one attachment the way portmap keys its state: network name plus
// container id (not the interface: the reference keyed it so, and chain names built
// from it are an operator-visible API).
type attachment struct {
	net string
	cid string
}

// hash is the 21 hex digits of sha512(network+containerID) that the reference puts
// after "CNI-DN-" (its chain names are cut to 28 characters).
func (o attachment) hash() string {
	sum := sha512.Sum512([]byte(o.net + o.cid))
	return hex.EncodeToString(sum[:])[:21]
}

// commentPrefix starts the reference's ownership comment of the DNAT entry rules,
// `dnat name: "<net>" id: "<cid>"`; the nftables backend tags its rules and map elements
// with the quote-free form, `dnat net=<net> id=<cid>` (owner.Tag).
const commentPrefix = "dnat "

// nftCommentMax keeps a comment short enough for nft to show in full and for a rule's
// userdata to hold beside the mapping record.
const nftCommentMax = 128

func (o attachment) iptComment() string {
	return owner.Comment(commentPrefix, o.net, o.cid, iptables.MaxComment)
}

func (o attachment) nftComment() string {
	return owner.Tag(commentPrefix, o.net, o.cid, nftCommentMax)
}

// nftCommentBefore is the nftables comment of versions before the quote-free one, still
// recognised on elements they installed.
func (o attachment) nftCommentBefore() string {
	return owner.Comment(commentPrefix, o.net, o.cid, nftCommentMax)
}

// installed is an attachment as GC finds it in the kernel: the hash its chains are named
// by, and the network and container fields of its comment (either may be a hashed form).
type installed struct {
	hash, net, id string
}

// installedFrom reads an attachment's comment and the chain its state jumps to ("" when
// either is not portmap's).
func installedFrom(comment, chain, chainPrefix string) (installed, bool) {
	net, id, ok := owner.Parse(commentPrefix, comment)
	if !ok {
		net, id, ok = owner.ParseTag(commentPrefix, comment)
	}
	hash, mine := strings.CutPrefix(chain, chainPrefix)
	return installed{hash: hash, net: net, id: id}, ok && mine && hash != ""
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
