package vrf

import (
	"testing"

	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzLoad feeds arbitrary configs to the loaders: they must never panic, a config ADD
// accepts names a valid interface name and a usable table, and DEL reads the VRF name
// ADD does.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"vrf","vrfname":"blue"}`,
		`{"vrfname":"blue","table":1001}`, `{"vrfname":"blue","table":254}`, `{"vrfname":"../x"}`,
		`{"vrfname":"blue","table":-1}`, `{"vrfname":"blue","table":4294967296}`, `{"vrfname":""}`, `{"vrfname":7}`, `{"vrfname":"blue","table":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &skel.Request{Config: data}
		if name, err := nameForDel(req); err == nil && skel.ValidateIfName(name) != nil {
			t.Fatalf("DEL takes VRF name %q", name)
		}
		p, err := load(req)
		if err != nil {
			return
		}
		if name, err := nameForDel(req); err != nil || name != p.Name {
			t.Fatalf("DEL reads VRF %q (%v) where ADD reads %q", name, err, p.Name)
		}
		if skel.ValidateIfName(p.Name) != nil {
			t.Fatalf("accepted VRF name %q", p.Name)
		}
		if p.Table != 0 && lockedns.ReservedTable(int64(p.Table)) {
			t.Fatalf("accepted reserved table %d", p.Table)
		}
	})
}
