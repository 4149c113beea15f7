package owner

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (rule comments and nftables userdata): they must be
// those derived before the switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{Hashed("c"), "sha256:2e7d2c03a9507ae265ecf5b5356885a5"},
		{Hashed(nametest.ID64), "sha256:331ab04caa328927f706627b812f4139"},
		{Hashed(nametest.ID240), "sha256:6eed770fd683be8a49d1d86ce34ec4f7"},
	})
}
