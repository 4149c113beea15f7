package vrf_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
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
			o := pt.Exec(t, nil, pt.Call{Bin: plugin, Command: "ADD", ContainerID: "ctr1", Netns: w.cont.Path,
				IfName: "net1", Path: "/nonexistent", Config: c})
			pt.AssertFailed(t, o, cnierror.CodeInvalidConfig)
			assert.Equal(t, "", w.masterOf("net1"))
		})
	}
}
