package reftest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReferenceBinariesAnswerVersion proves the build is the pinned release's programs:
// each answers CNI_COMMAND=VERSION with the spec versions a v1.9 plugin speaks.
func TestReferenceBinariesAnswerVersion(t *testing.T) {
	for _, name := range []string{"bridge", "host-local", "portmap", "bandwidth", "firewall", "tuning", "loopback"} {
		cmd := exec.Command(Bin(t, name))
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.0.0"}`)
		out, err := cmd.Output()
		require.NoError(t, err, name)
		var v struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		require.NoError(t, json.Unmarshal(out, &v), "%s: %s", name, out)
		assert.Contains(t, v.SupportedVersions, "1.1.0", name)
	}
}
