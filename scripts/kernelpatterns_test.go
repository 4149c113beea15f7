package scripts

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelSkipNotesBecomeOneRunPatternPerPackage: test-kernel.sh turns the skip notes of
// every test process (sorted, unique) into one -test.run pattern per package directory,
// naming each top-level test once, so the VM runs exactly the tests that skipped here.
func TestKernelSkipNotesBecomeOneRunPatternPerPackage(t *testing.T) {
	notes := "/r/internal/plugins/vlan\tTestA\n" +
		"/r/internal/plugins/vlan\tTestB\n" +
		"/r/internal/plugins/vrf\tTestC\n"
	cmd := exec.Command("awk", "-F", "\t", "-f", "test-kernel/patterns.awk")
	cmd.Stdin = strings.NewReader(notes)
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Equal(t, "/r/internal/plugins/vlan ^(TestA|TestB)$\n/r/internal/plugins/vrf ^(TestC)$\n", string(out))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pattern := strings.Fields(line)[1]
		assert.Regexp(t, `^\^\(Test\w+(\|Test\w+)*\)\$$`, pattern)
	}
}
