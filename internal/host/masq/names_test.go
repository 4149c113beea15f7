package masq

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (chains and nftables chains, some of them the
// reference's): they must be those derived before the switch to crypto/sha2 (see
// nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{iptChainName("n", "c"), "CNI-c97b5d9d77370aab342f113c"},
		{iptChainName("mynet", nametest.ID64), "CNI-9d734053ec306d470d96763c"},
		{iptChainName(nametest.Net100, nametest.ID240), "CNI-cb5f77cf1cb00a7f30c9b173"},
		{nftChainPrefix("n"), "m-1b16b1df538b-"},
		{nftChainPrefix("mynet"), "m-11c844f95e28-"},
		{nftChainPrefix(nametest.Net100), "m-52d7a82025a9-"},
		{nftChainName("n", "c", "e"), "m-1b16b1df538b-09bccacfc9f7b21602ba"},
		{nftChainName("mynet", nametest.ID64, "eth0"), "m-11c844f95e28-c12f79c7d73a4c118a9f"},
		{nftChainName(nametest.Net100, nametest.ID240, "eth0123456789ab"), "m-52d7a82025a9-a79ac06cd5854fd7805e"},
		{refNetworkHash("n"), "917148ec47923f2e"},
		{refNetworkHash("mynet"), "d23676b4f2d9fe04"},
		{refNetworkHash(nametest.Net100), "c6f1b810aff4fcc7"},
		{refInstanceHash("n", "e", "c"), "917148ec47923f2e-c314a59299a3c620"},
		{refInstanceHash("mynet", "eth0", nametest.ID64), "d23676b4f2d9fe04-115cde3d6e8505e2"},
		{refInstanceHash(nametest.Net100, "eth0123456789ab", nametest.ID240), "c6f1b810aff4fcc7-2000a6cbf9885a35"},
		{iptComment("mynet", nametest.ID240), `name: "mynet" id: "sha256:6eed770fd683be8a49d1d86ce34ec4f7"`},
		{iptComment(nametest.Net100+nametest.Net100+nametest.Net100, nametest.ID240), `name: "sha256:a1b0bbdcb0ae5df075613422e4d93e60" id: "sha256:6eed770fd683be8a49d1d86ce34ec4f7"`},
	})
}
