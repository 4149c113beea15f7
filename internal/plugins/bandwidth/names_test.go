package bandwidth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (ifbs and their
// aliases, the ifb names the reference's), so they must never change; cmd/cni's
// TestDigestsMatchTheHandWrittenOnes compares the digests themselves over every padding
// case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	net100 := strings.Repeat("net-", 25)
	for _, c := range []struct{ got, want string }{
		{ifbName("n", "c"), "bwpc97b5d9d7737"},
		{ifbName("mynet", id64), "bwp9d734053ec30"},
		{ifbName(net100, id240), "bwpcb5f77cf1cb0"},
		{ownerPrefix(net100 + net100), "cni-bandwidth net=sha512:965430f25ed8a0ffa8fca03778930f54 id="},
		{ownerPrefix(net100 + net100 + net100), "cni-bandwidth net=sha512:7adc52f99e69814eed50e911962b35c4 id="},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
