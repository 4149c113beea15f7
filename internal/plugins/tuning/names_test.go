package tuning

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (backup files): they must be those derived before the
// switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{backupNames("c", "e")[1], "h-222342f587c54b04a6db091c281a8e11a0dd7772fa5fdb60cedc5219984c9b29.json"},
		{backupNames(nametest.ID64, "eth0")[1], "h-3bc66aaac0667fc5b2d20a7332074f592637abe258258720ba13a35d09e57259.json"},
		{backupNames(nametest.ID240, "eth0123456789ab")[0], "h-dde78cbbc038ab41ab667060c2cf4f0f416ed13519b0c88a29adb33c955df4f6.json"},
	})
}
