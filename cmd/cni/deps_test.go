package main

import (
	"bytes"
	"fmt"
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

// Code of a package that runs before main (an init function, or a package variable
// that is not a constant layout: a map literal, regexp.MustCompile, fmt.Errorf,
// closures) runs in every exec of every plugin, whether that plugin uses the package or
// not. Ours keep such values lazy (sync.OnceValue) or make them data the linker lays out,
// so a package of ours spends at most what one package-level sync.OnceValue costs before
// main (2 allocations, 72 bytes with Go 1.26). Measured by the runtime itself
// (GODEBUG=inittrace=1) in VERSION exec'd as loopback. Before 2026-12-06 five packages
// spent 62,000 instructions and 73 allocations there (docs/performance.md).
func TestOurPackagesDoNoWorkBeforeMain(t *testing.T) {
	const maxAllocs, maxBytes = 2, 128
	cmd := exec.Command(testns.LinkPlugin(t, "loopback"))
	cmd.Env = []string{"CNI_COMMAND=VERSION", "GODEBUG=inittrace=1"}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0","name":"n","type":"loopback"}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("VERSION exec'd as loopback: %v\n%s", err, stderr.String())
	}
	inits := 0
	for _, line := range strings.Split(stderr.String(), "\n") {
		// init github.com/cnikit/cni/internal/host/iptables @1.7 ms, 0 ms clock, 72 bytes, 2 allocs
		var pkg string
		var at, clock float64
		var size, allocs int
		if _, err := fmt.Sscanf(line, "init %s @%g ms, %g ms clock, %d bytes, %d allocs", &pkg, &at, &clock, &size, &allocs); err != nil {
			continue
		}
		inits++
		if strings.HasPrefix(pkg, module+"/") && (allocs > maxAllocs || size > maxBytes) {
			t.Errorf("%s allocates %d times (%d bytes) before main in every exec (at most %d, %d bytes): make its package-level values lazy (sync.OnceValue) or constant data (a slice of pairs rather than a map literal, errors.New rather than fmt.Errorf)",
				pkg, allocs, size, maxAllocs, maxBytes)
		}
	}
	if inits == 0 {
		t.Fatalf("no inittrace lines read; stderr:\n%s", stderr.String())
	}
}
