package masq

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (chains and
// nftables chains, some of them the reference's), so they must never change; cmd/cni's
// TestDigestsMatchTheHandWrittenOnes compares the digests themselves over every padding
// case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	net100 := strings.Repeat("net-", 25)
	for _, c := range []struct{ got, want string }{
		{iptChainName("n", "c"), "CNI-c97b5d9d77370aab342f113c"},
		{iptChainName("mynet", id64), "CNI-9d734053ec306d470d96763c"},
		{iptChainName(net100, id240), "CNI-cb5f77cf1cb00a7f30c9b173"},
		{nftChainPrefix("n"), "m-1b16b1df538b-"},
		{nftChainPrefix("mynet"), "m-11c844f95e28-"},
		{nftChainPrefix(net100), "m-52d7a82025a9-"},
		{nftChainName("n", "c", "e"), "m-1b16b1df538b-09bccacfc9f7b21602ba"},
		{nftChainName("mynet", id64, "eth0"), "m-11c844f95e28-c12f79c7d73a4c118a9f"},
		{nftChainName(net100, id240, "eth0123456789ab"), "m-52d7a82025a9-a79ac06cd5854fd7805e"},
		{refNetworkHash("n"), "917148ec47923f2e"},
		{refNetworkHash("mynet"), "d23676b4f2d9fe04"},
		{refNetworkHash(net100), "c6f1b810aff4fcc7"},
		{refInstanceHash("n", "e", "c"), "917148ec47923f2e-c314a59299a3c620"},
		{refInstanceHash("mynet", "eth0", id64), "d23676b4f2d9fe04-115cde3d6e8505e2"},
		{refInstanceHash(net100, "eth0123456789ab", id240), "c6f1b810aff4fcc7-2000a6cbf9885a35"},
		{iptComment("mynet", id240), `name: "mynet" id: "sha256:6eed770fd683be8a49d1d86ce34ec4f7"`},
		{iptComment(net100+net100+net100, id240), `name: "sha256:a1b0bbdcb0ae5df075613422e4d93e60" id: "sha256:6eed770fd683be8a49d1d86ce34ec4f7"`},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
