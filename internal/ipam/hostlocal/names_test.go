package hostlocal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (index entries),
// so they must never change; cmd/cni's TestDigestsMatchTheHandWrittenOnes compares the
// digests themselves over every padding case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id240 := strings.Repeat("0123456789abcdef", 15)
	for _, c := range []struct{ got, want string }{
		{entryName(attachment{ID: "c", IfName: "e"}), "c:e"},
		{entryName(attachment{ID: id240, IfName: "eth0"}), "h-76e5ffd80c912eb293d6785a7d1c0a7e1c017521388c2d84ea8618b02df52894"},
		{entryName(attachment{ID: id240 + id240, IfName: "eth0123456789ab"}), "h-c05f6af51d0dcf2da41398c1fc793cc515826182e5b0879ccae0e5610b10cf9b"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
