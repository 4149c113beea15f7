package sbr_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testns"
)

// The binary, exec'd as a runtime execs it, answers bad input with a CNI error on
// stdout (code 7) and exit status 1, and leaves no rule.
func TestExecdBadInputIsACNIErrorAndLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", ipGw{"10.60.0.2/24", "10.60.0.1"})
	plugin := filepath.Join(testns.LinkPluginDir(t, "sbr"), "sbr")
	for name, c := range map[string][]byte{
		"no prevResult": conf(t, nil, ""),
		"bad gateway":   conf(t, prev, `"gateways":["10.60.0"]`),
		"bad table":     conf(t, prev, `"table":{}`),
	} {
		t.Run(name, func(t *testing.T) {
			var stdout bytes.Buffer
			cmd := exec.Command(plugin)
			cmd.Env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=ctr1", "CNI_NETNS=" + w.cont.Path,
				"CNI_IFNAME=net1", "CNI_PATH=/nonexistent"}
			cmd.Stdin, cmd.Stdout = bytes.NewReader(c), &stdout
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 1, exit.ExitCode())
			var e struct {
				Code uint   `json:"code"`
				Msg  string `json:"msg"`
			}
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &e), stdout.String())
			assert.Equal(t, uint(7), e.Code, e.Msg)
			assert.Empty(t, w.rules())
		})
	}
}
