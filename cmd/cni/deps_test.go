package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/testns"
)

// Every package linked into cni runs its init in every plugin exec, so start-up pays for
// the whole import graph. These were taken out on purpose (see the README's Performance
// section); this keeps them out.
func TestImportGraphStaysLean(t *testing.T) {
	if testns.Prebuilt() {
		t.Skip("a property of the source tree, checked where it is built: prebuilt test binaries (make test-kernel) have neither the source nor the go tool")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed to list the import graph: %v", err)
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	banned := []string{
		"crypto/",             // the FIPS 140 module's inits; names use internal/sha2
		"github.com/godbus/",  // internal/dbus speaks to firewalld
		"net/http", "net/url", // nothing here speaks HTTP
		// The dhcp plugin/daemon wire is net/rpc's, framed by hand over encoding/gob:
		// linking net/rpc (net/http, html/template, crypto) cost 17 % more CPU per plugin
		// exec and 1.5 MB (bridge VERSION, 1500 paired runs; README, "The dhcp daemon").
		"net/rpc", "html/template",
		"os/user", "text/template", "math/big",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if pkg == strings.TrimSuffix(b, "/") || strings.HasPrefix(pkg, b) && strings.HasSuffix(b, "/") {
				t.Errorf("cni links %s; keep %s out of the binary's import graph", pkg, b)
			}
		}
	}
}
