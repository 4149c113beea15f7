package portmap

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (the reference's chain names): they must be those
// derived before the switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{attachment{net: "n", cid: "c"}.hash(), "c97b5d9d77370aab342f1"},
		{attachment{net: "mynet", cid: nametest.ID64}.hash(), "9d734053ec306d470d967"},
		{attachment{net: nametest.Net100, cid: nametest.ID240}.hash(), "cb5f77cf1cb00a7f30c9b"},
	})
}
