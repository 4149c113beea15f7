package bandwidth

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (ifbs and their aliases, the ifb names the reference's):
// they must be those derived before the switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{ifbName("n", "c"), "bwpc97b5d9d7737"},
		{ifbName("mynet", nametest.ID64), "bwp9d734053ec30"},
		{ifbName(nametest.Net100, nametest.ID240), "bwpcb5f77cf1cb0"},
		{ownerPrefix(nametest.Net100 + nametest.Net100), "cni-bandwidth net=sha512:965430f25ed8a0ffa8fca03778930f54 id="},
		{ownerPrefix(nametest.Net100 + nametest.Net100 + nametest.Net100), "cni-bandwidth net=sha512:7adc52f99e69814eed50e911962b35c4 id="},
	})
}
