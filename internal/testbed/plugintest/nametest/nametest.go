// Package nametest is what the golden-name tests of the packages that hash names share:
// the inputs the names are derived from, and the check. Those names (iptables and
// nftables chains, ifbs and their aliases, index and backup files, rule comments,
// cnitool's container ids) were derived with the hand-written internal/sha2 before
// issue 17 replaced it with crypto/sha256 and crypto/sha512. They exist on nodes, so
// they must never change; cmd/cni's TestDigestsMatchTheHandWrittenOnes compares the
// digests themselves over every padding case and random inputs.
package nametest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The inputs: a container id as runtimes make them (64 hex digits), one of 240 bytes
// and a network name of 100, both longer than any name made of them may be.
const (
	ID64   = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	ID240  = hex80 + hex80 + hex80
	Net100 = net20 + net20 + net20 + net20 + net20

	hex80 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	net20 = "net-net-net-net-net-"
)

// Name is what a naming function gives now, then what it gave before the switch.
type Name [2]string

// AssertUnchanged checks that every name is the one derived before the switch.
func AssertUnchanged(t testing.TB, names []Name) {
	t.Helper()
	for _, n := range names {
		got, want := n[0], n[1]
		assert.Equal(t, want, got)
	}
}
