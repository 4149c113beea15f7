package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// Every package linked into cni runs its init in every plugin exec and grows the binary.
// A package is kept out here only for a cost measured side by side (cnibench -base:
// bridge VERSION exec'd from a build with it and one without, in alternating pairs,
// 300 pairs per round, on this project's 2-vCPU test VM) and written beside it; see
// docs/dependencies.md for the rule and the figures of what is linked.
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
		// +2.1 ms per exec (+15 %; 2 rounds, +2.15 and +2.09 ms), +43 page faults, +1.04 MB
		// stripped, for a blank import into the 2026-11-30 build (issue 17).
		"net/http",
		// The dhcp plugin/daemon wire is net/rpc's, framed by hand over encoding/gob:
		// linking net/rpc (net/http, html/template, crypto) cost 17 % more CPU per plugin
		// exec and 1.5 MB (bridge VERSION, 1500 paired runs; docs/dependencies.md).
		"net/rpc", "html/template",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if pkg == strings.TrimSuffix(b, "/") || strings.HasPrefix(pkg, b) && strings.HasSuffix(b, "/") {
				t.Errorf("cni links %s; keep %s out of the binary's import graph", pkg, b)
			}
		}
	}
}
