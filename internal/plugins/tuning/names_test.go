package tuning

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (backup files),
// so they must never change; cmd/cni's TestDigestsMatchTheHandWrittenOnes compares the
// digests themselves over every padding case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id64 := "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	id240 := strings.Repeat("0123456789abcdef", 15)
	for _, c := range []struct{ got, want string }{
		{backupNames("c", "e")[1], "h-222342f587c54b04a6db091c281a8e11a0dd7772fa5fdb60cedc5219984c9b29.json"},
		{backupNames(id64, "eth0")[1], "h-3bc66aaac0667fc5b2d20a7332074f592637abe258258720ba13a35d09e57259.json"},
		{backupNames(id240, "eth0123456789ab")[0], "h-dde78cbbc038ab41ab667060c2cf4f0f416ed13519b0c88a29adb33c955df4f6.json"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
