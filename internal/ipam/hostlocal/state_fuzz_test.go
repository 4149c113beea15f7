package hostlocal

import (
	"strings"
	"testing"
)

// FuzzStateFiles feeds arbitrary bytes to the readers of what is found on disk: a
// reservation file's content and an index record. Neither may panic, and whatever they
// accept must be what the writers would write for it.
func FuzzStateFiles(f *testing.F) {
	for _, seed := range []string{"c1\r\neth0", "c1", "  legacy \n", "", "c 1", "\x00", "c1\r\n\r\neth0",
		"cni-index-v1|10.1.0.2,fd00::2|c1|eth0", "cni-index-v1||c1|eth0", "cni-index-v1|10.1.0.2|c1|a|b",
		"cni-index-v1|garbage|c1|eth0", strings.Repeat("c", 300) + "\r\neth0"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if att, ok := parseReservation([]byte(s)); ok {
			again, ok2 := parseReservation([]byte(att.content()))
			if !ok2 || again != att {
				t.Fatalf("reservation %q read as %+v, which writes %q, read back as %+v", s, att, att.content(), again)
			}
		}
		if att, addrs, ok := parseEntry(s); ok {
			if len(addrs) == 0 {
				t.Fatalf("record %q accepted without addresses", s)
			}
			again, addrs2, ok2 := parseEntry(entryRecord(att, addrs))
			if !ok2 || again != att || len(addrs2) != len(addrs) {
				t.Fatalf("record %q does not round-trip: %+v %v", s, again, addrs2)
			}
		}
	})
}
