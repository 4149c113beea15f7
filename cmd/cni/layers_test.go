package main

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/testbed/testns"
)

const module = "github.com/cnikit/cni"

// entry is one directory under internal/ (or cmd/) and the layer it sits in: a package
// imports only packages of lower layers and of its own entry (docs/architecture.md).
// Two entries of one layer (host and obs; plugins and chain) stay out of each other:
// the chain plugin reaches the built-in plugins through the lookup dispatch hands it.
type entry struct {
	dir   string
	layer int
}

var entries = []entry{
	{"internal/core", 0},
	{"internal/result", 1},
	{"internal/obs", 2},
	{"internal/host", 2},
	{"internal/spec", 3},
	{"internal/ipam", 4},
	{"internal/plugins", 5},
	{"internal/chain", 5},
	{"internal/runtime", 6},
	{"internal/dispatch", 7},
	{"cmd", 8},
	{"scripts", 8},
	// The public packages, for programs outside the module: a sibling of cmd, so the
	// cni binary never links them (pkg/inproc adds nothing to it).
	{"pkg", 8},
	// Test-only: above everything it tests; see testOnly.
	{"internal/testbed", 9},
}

// testTools are commands that drive tests and benchmarks, never linked into cni, and so
// may use the test bed: cnibench builds its hosts and containers with testns, nofirewall
// is the wrapper of `make test-nofirewall` and shares testns's name for the variable the
// tests read.
var testTools = []string{"cmd/cnibench", "cmd/nofirewall"}

// testOnly reports whether pkg (module-relative) exists for tests alone: the test bed,
// and the helper packages beside what they help test (skel/skeltest, result/resulttest).
func testOnly(pkg string) bool {
	return pkg == "internal/testbed" || strings.HasPrefix(pkg, "internal/testbed/") ||
		strings.HasSuffix(pkg[strings.LastIndex(pkg, "/")+1:], "test")
}

func entryOf(pkg string) (entry, bool) {
	for _, e := range entries {
		if pkg == e.dir || strings.HasPrefix(pkg, e.dir+"/") {
			return e, true
		}
	}
	return entry{}, false
}

// layerViolations returns, for a graph of module-relative package paths to the ones
// they import (tests' imports excluded), one message per edge against the layers.
func layerViolations(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		from, ok := entryOf(pkg)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no layer: put it under one of the entries of cmd/cni/layers_test.go (docs/architecture.md)", pkg))
			continue
		}
		for _, imp := range imports {
			to, ok := entryOf(imp)
			switch {
			case !ok:
				// reported as a package of its own
			case testOnly(imp) && !testOnly(pkg) && !slices.Contains(testTools, pkg):
				bad = append(bad, fmt.Sprintf("%s imports %s: only tests, test helpers and %s may use a test-only package", pkg, imp, strings.Join(testTools, ", ")))
			case testOnly(pkg) || slices.Contains(testTools, pkg):
				// tests' helpers sit above all they test
			case to.layer > from.layer:
				bad = append(bad, fmt.Sprintf("%s imports %s: %s (layer %d) must not import %s (layer %d), a layer above it", pkg, imp, from.dir, from.layer, to.dir, to.layer))
			case to.layer == from.layer && to.dir != from.dir:
				bad = append(bad, fmt.Sprintf("%s imports %s: %s and %s are siblings of layer %d and stay out of each other", pkg, imp, from.dir, to.dir, from.layer))
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// moduleGraph lists every package of the module with the module's packages it imports,
// module-relative; tests' imports are not in go list's Imports.
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go tool is needed to list the import graph: %v", err)
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	graph := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		graph[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				graph[pkg] = append(graph[pkg], rel)
			}
		}
	}
	return graph
}

func TestPackagesImportOnlyLowerLayers(t *testing.T) {
	if testns.Prebuilt() {
		t.Skip("a property of the source tree, checked where it is built: prebuilt test binaries (make test-kernel) have neither the source nor the go tool")
	}
	graph := moduleGraph(t)
	for _, want := range []string{"cmd/cni", "internal/dispatch", "internal/host/link", "internal/core/background"} {
		assert.Contains(t, graph, want, "go list found the module's packages")
	}
	for _, msg := range layerViolations(graph) {
		t.Error(msg)
	}
}

func TestLayerViolationsNameTheEdge(t *testing.T) {
	graph := map[string][]string{
		"internal/host/link":              {"internal/core/steps", "internal/spec/skel"},
		"internal/host/masq":              {"internal/obs/invlog", "internal/host/iptables"},
		"internal/plugins/bridge":         {"internal/chain", "internal/ipam"},
		"internal/ipam/hostlocal":         {"internal/testbed/testns", "internal/spec/skel/skeltest"},
		"internal/spec/skel/skeltest":     {"internal/testbed/plugintest", "internal/spec/skel"},
		"internal/testbed/plugintest":     {"internal/dispatch"},
		"cmd/cnibench":                    {"internal/testbed/testns", "internal/dispatch"},
		"cmd/cni":                         {"internal/dispatch"},
		"internal/spare":                  nil,
		"internal/plugins/attachment/fix": {"internal/plugins/bridge"},
	}
	assert.Equal(t, []string{
		"internal/host/link imports internal/spec/skel: internal/host (layer 2) must not import internal/spec (layer 3), a layer above it",
		"internal/host/masq imports internal/obs/invlog: internal/host and internal/obs are siblings of layer 2 and stay out of each other",
		"internal/ipam/hostlocal imports internal/spec/skel/skeltest: only tests, test helpers and cmd/cnibench, cmd/nofirewall may use a test-only package",
		"internal/ipam/hostlocal imports internal/testbed/testns: only tests, test helpers and cmd/cnibench, cmd/nofirewall may use a test-only package",
		"internal/plugins/bridge imports internal/chain: internal/plugins and internal/chain are siblings of layer 5 and stay out of each other",
		"internal/spare is in no layer: put it under one of the entries of cmd/cni/layers_test.go (docs/architecture.md)",
	}, layerViolations(graph))
}
