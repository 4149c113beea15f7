package owner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCommentIsTheReferenceFormWhenItFits(t *testing.T) {
	c := Comment("dnat ", "net1", "abc123", 255)
	assert.Equal(t, `dnat name: "net1" id: "abc123"`, c)
	net, id, ok := Parse("dnat ", c)
	require.True(t, ok)
	assert.Equal(t, "net1", net)
	assert.Equal(t, "abc123", id)
}

// TestLongIdsGiveDistinctCommentsWithinTheLimit: two 240-character ids that differ only
// at the end must not share a comment (a cut comment did: DEL of one removed the other's
// rules, or a cut comment matched nothing and rules leaked).
func TestLongIdsGiveDistinctCommentsWithinTheLimit(t *testing.T) {
	a := strings.Repeat("a", 239) + "1"
	b := strings.Repeat("a", 239) + "2"
	for _, max := range []int{255, 128} {
		ca, cb := Comment("", "demo", a, max), Comment("", "demo", b, max)
		assert.LessOrEqual(t, len(ca), max)
		assert.NotEqual(t, ca, cb)
		net, id, ok := Parse("", ca)
		require.True(t, ok, ca)
		assert.True(t, Names(net, "demo"))
		assert.True(t, Names(id, a))
		assert.False(t, Names(id, b))
		assert.True(t, NewSet(a).Has(id))
		assert.False(t, NewSet(b).Has(id))
	}
}

func TestVeryLongNetworkNamesAreHashedToo(t *testing.T) {
	net := strings.Repeat("n", 200)
	c := Comment("dnat ", net, "cid", 128)
	assert.LessOrEqual(t, len(c), 128)
	gotNet, gotID, ok := Parse("dnat ", c)
	require.True(t, ok)
	assert.True(t, Names(gotNet, net))
	assert.True(t, Names(gotID, "cid"))
}

func TestParseRefusesOtherComments(t *testing.T) {
	for _, c := range []string{"", "CNI portfwd masquerade mark", `name: "n" id: "c"`, `dnat name: "n" id: "c" extra`, `dnat name: n id: c`} {
		_, _, ok := Parse("dnat ", c)
		assert.False(t, ok, c)
	}
	assert.False(t, Names("sha256:00", "x"), "a hashed field names only what hashes to it")
}

// TestTagHasNoQuotesAndReadsBack: nft prints a comment in double quotes without escaping
// the ones inside, so the nftables form has none.
func TestTagHasNoQuotesAndReadsBack(t *testing.T) {
	for _, id := range []string{"abc123", strings.Repeat("a", 240)} {
		tag := Tag("dnat ", "net1", id, 128)
		assert.NotContains(t, tag, `"`)
		assert.LessOrEqual(t, len(tag), 128)
		net, got, ok := ParseTag("dnat ", tag)
		require.True(t, ok, tag)
		assert.True(t, Names(net, "net1"))
		assert.True(t, Names(got, id))
	}
	assert.Equal(t, "dnat net=net1 id=abc123", Tag("dnat ", "net1", "abc123", 128))
	for _, bad := range []string{"", "dnat net=a", "dnat net=a id=b c", `dnat name: "a" id: "b"`, "dnat id=b net=a"} {
		_, _, ok := ParseTag("dnat ", bad)
		assert.False(t, ok, bad)
	}
}
