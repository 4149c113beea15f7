package vrf_test

import (
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
	w, prev := newNet1(t)
	call := pt.Call{Bin: testns.LinkPlugin(t, "vrf"), Command: "ADD", ContainerID: "ctr1",
		Netns: w.cont.Path, IfName: "net1", Path: "/nonexistent"}
	pt.AssertEachRefused(t, nil, call, cnierror.CodeInvalidConfig, map[string][]byte{
		"no vrfname":    conf(t, prev, ""),
		"space in name": conf(t, prev, `"vrfname":"a b"`),
		"bad table":     conf(t, prev, `"vrfname":"blue","table":"x"`),
	}, func(t *testing.T) { assert.Equal(t, "", w.masterOf("net1")) })
}
