package sbr

import (
	"testing"

	"github.com/cnikit/cni/internal/skel"
)

// FuzzPlan feeds arbitrary configs to the loader: it must never panic, and a config it
// accepts must name a usable table and gateways of the right family.
func FuzzPlan(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"sbr"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"sbr","table":100,"gateways":["10.0.0.1","fd00::1"],"addSourceHints":true}`,
		`{"table":254}`, `{"table":-5}`, `{"table":4294967296}`, `{"gateways":["::ffff:10.0.0.1"]}`,
		`{"gateways":["fe80::1%eth0"]}`, `{"gateways":[""]}`, `{"table":1e3}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan(&skel.Request{Config: data})
		if err != nil {
			return
		}
		if p.Table != 0 && reservedTable(int64(p.Table)) {
			t.Fatalf("accepted reserved table %d", p.Table)
		}
		if p.GW4.IsValid() && !p.GW4.Is4() || p.GW6.IsValid() && !p.GW6.Is6() {
			t.Fatalf("gateways of the wrong family: %v %v", p.GW4, p.GW6)
		}
	})
}
