package tuning

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cnikit/cni/internal/host/sysctl"
)

// FuzzBackupRead feeds arbitrary bytes as a backup file to what DEL does with it before
// touching the kernel: read, decode, split into restore steps, filter the sysctl names.
// Nothing may panic; an unusable backup is dropped (removed), a usable one is kept.
func FuzzBackupRead(f *testing.F) {
	for _, seed := range []string{
		`{"mac":"0a:58:0a:09:00:42","mtu":1500,"promisc":false,"allmulti":false,"txQLen":1000,` +
			`"sysctls":{"net/ipv4/conf/eth0/arp_ignore":"0","net/core/somaxconn":"4096"}}`,
		`{}`, `{"mac":"zz"}`, `{"sysctls":{"kernel/hostname":"x","net/../kernel/x":"y"}}`, `{"mtu":"big"}`, `{`, ``, `null`,
	} {
		f.Add([]byte(seed))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		names := backupNames("ctr1", "eth0")
		if err := os.WriteFile(filepath.Join(dir, names[0]), data, 0o600); err != nil {
			t.Fatal(err)
		}
		store, err := openBackups(dir, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		defer store.close()
		b, name := store.read(names)
		if b == nil {
			if _, err := os.Lstat(filepath.Join(dir, names[0])); !os.IsNotExist(err) {
				t.Fatalf("unusable backup %q was not dropped: %v", data, err)
			}
			return
		}
		if name != names[0] {
			t.Fatalf("found under %q", name)
		}
		b.linkSteps(io.Discard)
		for n := range b.Sysctls {
			sysctl.Name(n)
		}
		if err := store.remove(name); err != nil {
			t.Fatal(err)
		}
	})
}
