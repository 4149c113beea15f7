package scripts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoFirewallPackagesNameTestedPackages: every pattern of nofirewall-packages (which
// make test-nofirewall and make test-kernel's second pass read) names a directory of
// the module holding tests, so no pattern silently runs nothing.
func TestNoFirewallPackagesNameTestedPackages(t *testing.T) {
	b, err := os.ReadFile("nofirewall-packages")
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		dir := filepath.Join("..", strings.TrimSuffix(strings.TrimSuffix(line, "..."), "/"))
		tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		deeper, _ := filepath.Glob(filepath.Join(dir, "*", "*_test.go"))
		assert.NotEmpty(t, append(tests, deeper...), "%s holds no tests", line)
	}
	assert.NotZero(t, n)
}
