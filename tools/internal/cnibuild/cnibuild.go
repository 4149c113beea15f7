// Package cnibuild builds the cni binary of the parent module for the build tools'
// tests, the way the Makefile does (static, -trimpath, no build id), so that the tests
// check what make image and make packages ship.
package cnibuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Flags are the Makefile's build flags without the version stamp.
var Flags = []string{"-trimpath", "-ldflags", "-s -w -buildid="}

var (
	mu    sync.Mutex
	built = map[string]string{}
	dir   string
)

// Root is the parent module's directory (the repository root).
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// PrebuiltEnv names a directory holding linux-<arch>/cni, as make builds them for
// make image (make test-tools sets it): the test processes then share those builds
// instead of linking their own.
const PrebuiltEnv = "CNI_TEST_ARCH_BINS"

// Binary returns a static linux build of ./cmd/cni for arch: the prebuilt one of
// $CNI_TEST_ARCH_BINS, or one made once per process.
func Binary(arch string) (string, error) { return program("cni", arch, Build) }

// GCCaller returns a static linux build of the tools' ./cmd/cni-gc-cri for arch, the
// GC caller the packages and the image ship beside cni: the prebuilt one of
// $CNI_TEST_ARCH_BINS, or one made once per process.
func GCCaller(arch string) (string, error) { return program("cni-gc-cri", arch, BuildGCCaller) }

// program returns the build of name for arch, made by build once per process unless
// $CNI_TEST_ARCH_BINS holds it.
func program(name, arch string, build func(arch, out string) error) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	key := name + "/" + arch
	if p, ok := built[key]; ok {
		return p, nil
	}
	if d := os.Getenv(PrebuiltEnv); d != "" {
		p := filepath.Join(d, "linux-"+arch, name)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", PrebuiltEnv, d, err)
		}
		built[key] = p
		return p, nil
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "cnibuild-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	out := filepath.Join(dir, arch, name)
	if err := build(arch, out); err != nil {
		return "", err
	}
	built[key] = out
	return out, nil
}

// BuildGCCaller builds the tools' ./cmd/cni-gc-cri for arch into out, as make does.
func BuildGCCaller(arch, out string) error {
	return goBuild(filepath.Join(Root(), "tools"), "./cmd/cni-gc-cri", arch, out, Flags)
}

// Build builds ./cmd/cni for arch into out.
func Build(arch, out string) error { return build(arch, out, Flags) }

// BuildVersion is Build stamped with version, as make stamps a release: another
// binary than Build's, for a test of an upgrade.
func BuildVersion(arch, out, version string) error {
	return build(arch, out, []string{"-trimpath", "-ldflags", "-s -w -buildid= -X github.com/cnikit/cni/internal/core/build.Version=" + version})
}

func build(arch, out string, flags []string) error {
	return goBuild(Root(), "./cmd/cni", arch, out, flags)
}

// goBuild builds the package pkg of the module in dir, static, for linux/arch.
func goBuild(dir, pkg, arch, out string, flags []string) error {
	args := append([]string{"build"}, flags...)
	cmd := exec.Command("go", append(args, "-o", out, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, arch, err, b)
	}
	return nil
}

// Main is a TestMain of a package that builds cni: it runs the tests, then removes the
// builds.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// AssertAnswersVersion checks that the plugin binary at p, asked for its versions as a
// runtime asks (CNI_COMMAND=VERSION and nothing else), answers with the spec's version
// object: a test that installs or packages cni proves each link it made works.
func AssertAnswersVersion(t testing.TB, p string) {
	t.Helper()
	cmd := exec.Command(p)
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	out, err := cmd.Output()
	require.NoError(t, err, p)
	assert.Contains(t, string(out), `"cniVersion"`)
	assert.Contains(t, string(out), `"supportedVersions"`)
}

// Cleanup removes the builds; call it from TestMain after the tests ran.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}
