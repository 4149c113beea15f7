package sbr

import (
	"testing"

	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzPlan feeds arbitrary configs to the loaders: they must never panic, a config ADD
// accepts must name a usable table and gateways of the right family, and DEL reads the
// table ADD does.
func FuzzPlan(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"sbr"}`,
		`{"cniVersion":"1.1.0","name":"n","type":"sbr","table":100,"gateways":["10.0.0.1","fd00::1"],"addSourceHints":true}`,
		`{"table":254}`, `{"table":-5}`, `{"table":4294967296}`, `{"gateways":["::ffff:10.0.0.1"]}`,
		`{"gateways":["fe80::1%eth0"]}`, `{"gateways":[""]}`, `{"table":1e3}`, `{"table":"x"}`, `{"gateways":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &skel.Request{Config: data}
		if table, err := tableForDel(req); err == nil && lockedns.ReservedTable(int64(table)) && table != 0 {
			t.Fatalf("DEL takes reserved table %d", table)
		}
		p, err := plan(req)
		if err != nil {
			return
		}
		if table, err := tableForDel(req); err != nil || table != p.Table {
			t.Fatalf("DEL reads table %d (%v) where ADD reads %d", table, err, p.Table)
		}
		if p.Table != 0 && lockedns.ReservedTable(int64(p.Table)) {
			t.Fatalf("accepted reserved table %d", p.Table)
		}
		if p.GW4.IsValid() && !p.GW4.Is4() || p.GW6.IsValid() && !p.GW6.Is6() {
			t.Fatalf("gateways of the wrong family: %v %v", p.GW4, p.GW6)
		}
	})
}
