package hostlocal

import (
	"testing"

	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (index entries): they must be those derived before the
// switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{entryName(attachment{ID: "c", IfName: "e"}), "c:e"},
		{entryName(attachment{ID: nametest.ID240, IfName: "eth0"}), "h-76e5ffd80c912eb293d6785a7d1c0a7e1c017521388c2d84ea8618b02df52894"},
		{entryName(attachment{ID: nametest.ID240 + nametest.ID240, IfName: "eth0123456789ab"}), "h-c05f6af51d0dcf2da41398c1fc793cc515826182e5b0879ccae0e5610b10cf9b"},
	})
}
