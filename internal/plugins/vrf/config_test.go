package vrf

import (
	"testing"

	"github.com/cnikit/cni/internal/skel"
)

// FuzzLoad feeds arbitrary configs to the loader: it must never panic, and a config it
// accepts names a valid interface name and a usable table.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"vrf","vrfname":"blue"}`,
		`{"vrfname":"blue","table":1001}`, `{"vrfname":"blue","table":254}`, `{"vrfname":"../x"}`,
		`{"vrfname":"blue","table":-1}`, `{"vrfname":"blue","table":4294967296}`, `{"vrfname":""}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := load(&skel.Request{Config: data}, true)
		if err != nil {
			return
		}
		if skel.ValidateIfName(p.Name) != nil {
			t.Fatalf("accepted VRF name %q", p.Name)
		}
		if reservedTable(p.Table) {
			t.Fatalf("accepted reserved table %d", p.Table)
		}
	})
}
