package vrf_test

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
// stdout (code 7) and exit status 1.
func TestExecdBadInputIsACNIError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	prev := w.iface("net1", "10.201.0.0/16", "10.80.1.2/24")
	plugin := filepath.Join(testns.LinkPluginDir(t, "vrf"), "vrf")
	for name, c := range map[string][]byte{
		"no vrfname":    conf(t, prev, ""),
		"space in name": conf(t, prev, `"vrfname":"a b"`),
		"bad table":     conf(t, prev, `"vrfname":"blue","table":"x"`),
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
			assert.Equal(t, "", w.masterOf("net1"))
		})
	}
}
