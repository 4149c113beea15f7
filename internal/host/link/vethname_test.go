package link_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/link"
)

// printVethNameEnv makes the test binary print one RandomVethName and exit, so the
// test below can draw names in separate processes as concurrent plugins do.
const printVethNameEnv = "LINK_TEST_PRINT_VETH_NAME"

func TestMain(m *testing.M) {
	if os.Getenv(printVethNameEnv) == "1" {
		fmt.Print(link.RandomVethName())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRandomVethNameHasTheReferenceFormat(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		name := link.RandomVethName()
		require.Regexp(t, regexp.MustCompile(`^veth[0-9a-f]{8}$`), name)
		seen[name] = true
	}
	// 1000 draws from 2^32 values practically never repeat; a stuck generator would.
	assert.Greater(t, len(seen), 990)
}

// TestRandomVethNameDiffersBetweenProcesses guards the reason math/rand/v2 is good
// enough: every process is seeded anew, so plugins started at the same moment do not
// propose the same host name.
func TestRandomVethNameDiffersBetweenProcesses(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	draw := func() string {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), printVethNameEnv+"=1")
		out, err := cmd.Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	first, second := draw(), draw()
	assert.Regexp(t, regexp.MustCompile(`^veth[0-9a-f]{8}$`), first)
	assert.NotEqual(t, first, second)
}
