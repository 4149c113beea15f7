package kernelfeature

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FullKernelEnv is the environment variable the full-kernel VM run sets; with
// it a missing feature is a test failure rather than a skip.
const FullKernelEnv = "CNI_TEST_FULL_KERNEL"

// SkipLogEnv names a directory where Require notes every test it skips for a
// missing feature: make test-kernel runs the packages that can ask for one on the
// machine first, with it set, and then only the tests noted there in its VM, so
// that a new test that needs a feature runs there with no list to keep.
const SkipLogEnv = "CNI_TEST_KERNEL_SKIPS"

// memo holds one probe per feature, each run at most once per process: probing
// costs a namespace and a few netlink round trips, and the kernel's answer
// cannot change while the tests run. It is the package's only state; the
// array itself is never written after initialisation, only the sync.OnceValues
// inside it decide when the probe runs.
var memo = func() (m [featureCount]func() (bool, error)) {
	for f := range featureCount {
		m[f] = sync.OnceValues(func() (bool, error) { return probe(f) })
	}
	return m
}()

// Has reports whether the running kernel supports feature. The error is set
// only when the probe itself could not run (no permission to create a
// namespace, an unexpected netlink error); an unsupported feature is
// (false, nil).
func Has(feature Feature) (bool, error) {
	if feature < 0 || feature >= featureCount {
		return false, fmt.Errorf("kernelfeature: unknown %v", feature)
	}
	return memo[feature]()
}

// Require stops t unless the kernel supports feature: it skips on an ordinary
// kernel, and fails when CNI_TEST_FULL_KERNEL=1, because the VM run exists to
// exercise exactly these tests and a skip there would hide a broken setup.
func Require(t testing.TB, feature Feature) {
	t.Helper()
	ok, err := Has(feature)
	decide(t, feature, ok, err, os.Getenv(FullKernelEnv) == "1", os.Getenv(SkipLogEnv))
}

// decide is Require's verdict, apart from the probe so it can be tested with
// any probe outcome. A skip is noted in skipLog first, when it names a directory.
func decide(t testing.TB, feature Feature, ok bool, err error, fullKernel bool, skipLog string) {
	t.Helper()
	switch {
	case err != nil:
		t.Fatalf("kernelfeature: probe %s: %v", feature, err)
	case ok:
	case fullKernel:
		t.Fatalf("kernel lacks %s, but %s=1 promises a kernel that has it", feature, FullKernelEnv)
	default:
		noteSkip(t, skipLog)
		t.Skipf("kernel lacks %s: run `make test-kernel` to test this in a VM with a full kernel", feature)
	}
}

// noteSkip appends "<package dir>\t<top-level test>" to this process's file in dir (go
// test runs a package's tests in its directory): the VM runs the whole top-level test.
// A note that cannot be written fails the test, as the VM would miss the test.
func noteSkip(t testing.TB, dir string) {
	t.Helper()
	if dir == "" {
		return
	}
	cwd, err := os.Getwd()
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(filepath.Join(dir, fmt.Sprintf("skips-%d", os.Getpid())), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	}
	if err == nil {
		top, _, _ := strings.Cut(t.Name(), "/")
		_, err = fmt.Fprintf(f, "%s\t%s\n", cwd, top)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("kernelfeature: noting the skip in %s=%s: %v", SkipLogEnv, dir, err)
	}
}
