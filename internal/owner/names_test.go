package owner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (rule comments
// and nftables userdata), so they must never change; cmd/cni's
// TestDigestsMatchTheHandWrittenOnes compares the digests themselves over every padding
// case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	for _, c := range []struct{ got, want string }{
		{Hashed("c"), "sha256:2e7d2c03a9507ae265ecf5b5356885a5"},
		{Hashed(id64), "sha256:331ab04caa328927f706627b812f4139"},
		{Hashed(id240), "sha256:6eed770fd683be8a49d1d86ce34ec4f7"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
