package inproc_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// moduleRoot is the checkout's root, two levels above this package.
func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// requireGo skips a test that needs the Go toolchain and the source where there are
// none (the full-kernel VM runs prebuilt test binaries).
func requireGo(t testing.TB) string {
	t.Helper()
	if testns.Prebuilt() {
		t.Skip("needs the source and the go tool, which prebuilt test binaries (make test-kernel) have not")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go toolchain:", err)
	}
	return gobin
}

// TestCniBinaryDoesNotLinkThePublicPackage: the cni binary links neither pkg/inproc nor
// libcni, so the public package adds nothing to its size or start-up.
func TestCniBinaryDoesNotLinkThePublicPackage(t *testing.T) {
	gobin := requireGo(t)
	cmd := exec.Command(gobin, "list", "-deps", "./cmd/cni")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/cnikit/cni/internal/dispatch", "not the cni binary's dependencies")
	for _, dep := range deps {
		assert.NotContains(t, dep, "github.com/cnikit/cni/pkg/")
		assert.NotContains(t, dep, "github.com/containernetworking/cni")
	}
}

// TestAProgramOutsideTheModuleRunsTheStandardChain: a module of its own that requires
// this one (testdata/embedder) can import the public package, plug it into libcni and
// run the standard chain; it sees only what is public.
func TestAProgramOutsideTheModuleRunsTheStandardChain(t *testing.T) {
	testns.RequireRoot(t)
	gobin := requireGo(t)
	root := moduleRoot(t)
	src := t.TempDir()
	main, err := os.ReadFile("testdata/embedder/main.go")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "main.go"), main, 0o644))
	gomod := "module example.com/embedder\n\ngo 1.26.8\n\n" +
		"require (\n\tgithub.com/cnikit/cni v0.0.0\n\tgithub.com/containernetworking/cni v1.3.0\n)\n\n" +
		"replace github.com/cnikit/cni => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644))
	bin := filepath.Join(t.TempDir(), "embedder")
	build := exec.Command(gobin, "build", "-mod=mod", "-o", bin, ".")
	build.Dir = src
	// Offline: everything it needs is in the module cache this module was built from.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	host, ctr := testns.New(t), testns.New(t)
	conf := filepath.Join(t.TempDir(), "std.conflist")
	require.NoError(t, os.WriteFile(conf, []byte(standardChain(filepath.Join(t.TempDir(), "ipam"))), 0o644))
	cacheDir := t.TempDir()
	run, err := host.Exec(t, bin, conf, "outside", ctr.Path, cacheDir)
	require.NoError(t, err, run)
	assert.Contains(t, run, `"address":"10.78.0.2/16"`)
	assert.Empty(t, entries(t, filepath.Join(cacheDir, "results")))
	links, err := ctr.Exec(t, "ip", "-br", "link")
	require.NoError(t, err, links)
	assert.NotContains(t, links, "eth0")
}
