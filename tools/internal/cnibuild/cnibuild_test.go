package cnibuild_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// TestBinaryIsThePrebuiltOneWhenGiven: with CNI_TEST_ARCH_BINS set, the tools' tests
// test the binary found there, the one make image and make packages ship, and build
// none of their own.
func TestBinaryIsThePrebuiltOneWhenGiven(t *testing.T) {
	dir := t.TempDir()
	want := filepath.Join(dir, "linux-arm64", "cni")
	require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
	require.NoError(t, os.WriteFile(want, []byte("prebuilt"), 0o755))
	t.Setenv(cnibuild.PrebuiltEnv, dir)
	got, err := cnibuild.Binary("arm64")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// TestMakeTestToolsHandsThePrebuiltBinariesToGoTest runs make test-tools with a
// stand-in for go that records its directory, CNI_TEST_ARCH_BINS and arguments: go test
// runs in tools/ with the variable naming the repository's bin/, where the targets
// before it put the binaries. (The variable was set for the `cd` of `cd tools && go
// test` only, so the tests built binaries of their own.)
func TestMakeTestToolsHandsThePrebuiltBinariesToGoTest(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	fakeGo := filepath.Join(dir, "go")
	script := fmt.Sprintf("#!/bin/sh\necho \"$PWD|${%s-unset}|$*\" >> %q\n", cnibuild.PrebuiltEnv, log)
	require.NoError(t, os.WriteFile(fakeGo, []byte(script), 0o755))
	root, err := filepath.Abs(cnibuild.Root())
	require.NoError(t, err)

	cmd := exec.Command("make", "--no-print-directory", "-C", root, "test-tools", "GO="+fakeGo)
	// Not what the make running this test passes down: the variable must come from
	// the target itself.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case cnibuild.PrebuiltEnv, "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	data, err := os.ReadFile(log)
	require.NoError(t, err)
	calls := map[string]string{} // the go command ("vet", "test") -> directory|variable
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), "|", 3)
		require.Len(t, f, 3, line)
		cmd, _, _ := strings.Cut(f[2], " ")
		calls[cmd] = f[0] + "|" + f[1]
	}
	tools := filepath.Join(root, "tools")
	assert.Equal(t, tools+"|"+filepath.Join(root, "bin"), calls["test"], "go test in tools/, given the shipped binaries")
	assert.Equal(t, tools, strings.Split(calls["vet"], "|")[0], "go vet in tools/")
}
