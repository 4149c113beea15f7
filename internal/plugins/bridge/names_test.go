package bridge

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (spoof-check chains): they must be those derived before
// the switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{spoofKey{"n", "c", "e"}.chain(), "cni-sc-09bccacfc9f7b21602ba43e9"},
		{spoofKey{"mynet", nametest.ID64, "eth0"}.chain(), "cni-sc-c12f79c7d73a4c118a9f303b"},
		{spoofKey{nametest.Net100, nametest.ID240, "eth0123456789ab"}.chain(), "cni-sc-a79ac06cd5854fd7805ed68d"},
	})
}
