package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (spoof-check
// chains), so they must never change; cmd/cni's TestDigestsMatchTheHandWrittenOnes
// compares the digests themselves over every padding case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	net100 := strings.Repeat("net-", 25)
	for _, c := range []struct{ got, want string }{
		{spoofKey{"n", "c", "e"}.chain(), "cni-sc-09bccacfc9f7b21602ba43e9"},
		{spoofKey{"mynet", id64, "eth0"}.chain(), "cni-sc-c12f79c7d73a4c118a9f303b"},
		{spoofKey{net100, id240, "eth0123456789ab"}.chain(), "cni-sc-a79ac06cd5854fd7805ed68d"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
