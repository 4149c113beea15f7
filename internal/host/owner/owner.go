// Package owner writes and reads the comments that tie a firewall rule or an nftables
// element to the attachment it belongs to, in the reference plugins' form
//
//	name: "<network>" id: "<containerID>"
//
// behind a prefix of the plugin's ("dnat " for portmap). DEL and GC find state by these
// comments, so a comment must be exact and must never name two attachments. Each place
// has a length limit (255 bytes in iptables, which iptables-nft cuts silently; less in
// nftables userdata), and a container id may be some 240 characters long. A form that
// does not fit names the container, then also the network, by its hashed form
// "sha256:<hex>": no container id or network name can hold a colon (the spec's rule,
// skel enforces it), so a hashed form is never mistaken for a real name.
package owner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

const hashedPrefix = "sha256:"

// Hashed is the form a name takes in a comment that cannot hold it in full: 128 bits of
// its SHA-256, enough that no two attachments of a node ever share it.
func Hashed(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hashedPrefix + hex.EncodeToString(sum[:16])
}

func format(prefix, network, containerID string) string {
	return fmt.Sprintf("%sname: %q id: %q", prefix, network, containerID)
}

func formatTag(prefix, network, containerID string) string {
	return fmt.Sprintf("%snet=%s id=%s", prefix, network, containerID)
}

// Comment is the comment of the attachment (network, containerID): the reference form
// when it fits in max bytes, else with the container id hashed, else with both names
// hashed. The same arguments always give the same comment.
func Comment(prefix, network, containerID string, max int) string {
	return fit(format, prefix, network, containerID, max)
}

// Tag is Comment's form for nftables, `<prefix>net=<network> id=<containerID>`: `nft
// list ruleset` prints a comment inside double quotes without escaping the quotes of
// the reference form, so a listing holding one could not be read back by `nft -f`.
func Tag(prefix, network, containerID string, max int) string {
	return fit(formatTag, prefix, network, containerID, max)
}

func fit(form func(prefix, network, containerID string) string, prefix, network, containerID string, max int) string {
	if c := form(prefix, network, containerID); len(c) <= max {
		return c
	}
	if c := form(prefix, network, Hashed(containerID)); len(c) <= max {
		return c
	}
	return form(prefix, Hashed(network), Hashed(containerID))
}

// Parse returns the network and container fields of a comment that Comment wrote with
// prefix, as written (either may be a hashed form); ok is false for anything else.
func Parse(prefix, comment string) (network, containerID string, ok bool) {
	rest, found := strings.CutPrefix(comment, prefix)
	if !found {
		return "", "", false
	}
	n, err := fmt.Sscanf(rest, "name: %q id: %q", &network, &containerID)
	if err != nil || n != 2 || format(prefix, network, containerID) != comment {
		return "", "", false
	}
	return network, containerID, true
}

// ParseTag is Parse for a comment Tag wrote. Names hold no blanks or '=' (the spec's
// rule), so the fields split on them.
func ParseTag(prefix, tag string) (network, containerID string, ok bool) {
	rest, found := strings.CutPrefix(tag, prefix)
	f := strings.Fields(rest)
	if !found || len(f) != 2 {
		return "", "", false
	}
	network, okNet := strings.CutPrefix(f[0], "net=")
	containerID, okID := strings.CutPrefix(f[1], "id=")
	if !okNet || !okID || formatTag(prefix, network, containerID) != tag {
		return "", "", false
	}
	return network, containerID, true
}

// IsHashed reports whether a field returned by Parse is a hashed form.
func IsHashed(field string) bool { return strings.HasPrefix(field, hashedPrefix) }

// Names reports whether a field returned by Parse names name, in full or hashed.
func Names(field, name string) bool {
	return field == name || IsHashed(field) && field == Hashed(name)
}

// Set holds names (container ids of valid attachments) for matching fields returned by
// Parse: each name is held in full and hashed.
type Set map[string]bool

// NewSet returns the set of names.
func NewSet(names ...string) Set {
	s := Set{}
	for _, n := range names {
		s[n], s[Hashed(n)] = true, true
	}
	return s
}

// Has reports whether field names one of the set's names.
func (s Set) Has(field string) bool { return s[field] }
