package resulttest

import (
	"net/netip"
	"testing"

	"github.com/cnikit/cni/internal/result"
)

func TestAResultAsPrintedRoundTrips(t *testing.T) {
	res := &result.Result{CNIVersion: "1.1.0", Interfaces: []result.Interface{{Name: "eth0", Sandbox: "/x"}}}
	idx := 0
	res.IPs = []result.IPConfig{{Interface: &idx, Address: netip.MustParsePrefix("10.0.0.2/24")}}
	RequireRoundTrips(t, res)
}
