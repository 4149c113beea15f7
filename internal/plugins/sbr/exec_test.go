package sbr_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
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
			o := pt.Exec(t, nil, pt.Call{Bin: plugin, Command: "ADD", ContainerID: "ctr1", Netns: w.cont.Path,
				IfName: "net1", Path: "/nonexistent", Config: c})
			pt.AssertFailed(t, o, cnierror.CodeInvalidConfig)
			assert.Empty(t, w.rules())
		})
	}
}
