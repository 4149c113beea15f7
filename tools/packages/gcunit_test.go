package packages_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/packages"
)

// TestTheGCTimerRunsTheShippedCaller reads deploy/systemd/cni-gc.{service,timer}: the
// service is one round of the caller at the path the packages put it, the timer repeats
// it and is enabled by the package's link alone.
func TestTheGCTimerRunsTheShippedCaller(t *testing.T) {
	svc := readUnit(t, "cni-gc.service")
	assert.Equal(t, []string{"oneshot"}, svc["Type"])
	assert.Equal(t, []string{packages.GCCallerPath + " $CNI_GC_FLAGS"}, svc["ExecStart"])
	assert.Empty(t, svc["X-StaticWantedBy"], "the timer starts it")
	timer := readUnit(t, "cni-gc.timer")
	assert.Equal(t, []string{"timers.target"}, timer["X-StaticWantedBy"])
	assert.NotEmpty(t, timer["OnUnitActiveSec"], "it repeats")
}

// TestTheDebShipsTheGCCallerThatRuns builds the .deb from deploy/systemd and unpacks it:
// the caller is there, executable, and is the program (it answers -help), and a
// package without it is refused, since its unit would run nothing.
func TestTheDebShipsTheGCCallerThatRuns(t *testing.T) {
	deb, o := shippedDeb(t)
	root := t.TempDir()
	tool(t, "dpkg-deb", "-x", deb, root)
	caller := filepath.Join(root, packages.GCCallerPath)
	info, err := os.Stat(caller)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	out, err := exec.Command(caller, "-help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-socket")
	assert.FileExists(t, filepath.Join(root, packages.UnitDir, "cni-gc.timer"))

	o.GCCaller = ""
	_, err = packages.Write(o, "deb", t.TempDir())
	assert.ErrorContains(t, err, "the GC caller binary is needed")
}
