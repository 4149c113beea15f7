package sbr_test

import (
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
	w, prev := newNet1(t)
	call := pt.Call{Bin: testns.LinkPlugin(t, "sbr"), Command: "ADD", ContainerID: "ctr1",
		Netns: w.cont.Path, IfName: "net1", Path: "/nonexistent"}
	pt.AssertEachRefused(t, nil, call, cnierror.CodeInvalidConfig, map[string][]byte{
		"no prevResult": conf(t, nil, ""),
		"bad gateway":   conf(t, prev, `"gateways":["10.60.0"]`),
		"bad table":     conf(t, prev, `"table":{}`),
	}, func(t *testing.T) { assert.Empty(t, w.rules()) })
}
