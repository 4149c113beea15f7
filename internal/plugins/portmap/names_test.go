package portmap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (the reference's
// chain names), so they must never change; cmd/cni's TestDigestsMatchTheHandWrittenOnes
// compares the digests themselves over every padding case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	net100 := strings.Repeat("net-", 25)
	for _, c := range []struct{ got, want string }{
		{attachment{net: "n", cid: "c"}.hash(), "c97b5d9d77370aab342f1"},
		{attachment{net: "mynet", cid: id64}.hash(), "9d734053ec306d470d967"},
		{attachment{net: net100, cid: id240}.hash(), "cb5f77cf1cb00a7f30c9b"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
