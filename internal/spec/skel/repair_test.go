package skel

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// repairer is a plugin whose Repair finds two objects missing and counts the ones it
// is told to put back.
func repairer(putBack *int) *Plugin {
	p := (&recorder{}).plugin()
	p.Repair = func(req *Request) error {
		for _, what := range []string{"chain a missing", "rule b missing"} {
			if req.Repair().Found(what) {
				*putBack++
			}
		}
		return nil
	}
	return p
}

var repairArgs = Args{ContainerID: "abc", Netns: "/var/run/netns/nope", IfName: "eth0", Path: []string{"/opt/cni/bin"}}

// TestRepairReportsWhatIsMissingAndPutsItBackUnlessDryRun: the plugin's findings come
// back in order; a dry run (cni status) puts nothing back, a repair all of it.
func TestRepairReportsWhatIsMissingAndPutsItBackUnlessDryRun(t *testing.T) {
	for _, dryRun := range []bool{true, false} {
		var putBack int
		missing, err := InvokeRepair(context.Background(), repairer(&putBack), repairArgs, []byte(conf), nil, dryRun)
		require.NoError(t, err)
		assert.Equal(t, []string{"chain a missing", "rule b missing"}, missing)
		if dryRun {
			assert.Zero(t, putBack, "a dry run puts nothing back")
		} else {
			assert.Equal(t, 2, putBack)
		}
	}
}

// TestRepairIsNoCommandOfTheExecdPlugin: REPAIR is no spec command; CNI_COMMAND=REPAIR is
// refused (code 4) before the plugin runs, and a request of any spec command has no
// Repair record, whose Found says no.
func TestRepairIsNoCommandOfTheExecdPlugin(t *testing.T) {
	var putBack int
	r := runPlugin(repairer(&putBack), env(CmdRepair), conf)
	assert.Equal(t, 1, r.code)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInvalidEnv, e.Code)
	assert.Equal(t, "unknown CNI_COMMAND: REPAIR", e.Msg)
	assert.Zero(t, putBack)

	rec := &recorder{}
	require.Zero(t, runPlugin(rec.plugin(), env(CmdCheck), conf).code)
	assert.Nil(t, rec.got.Repair())
	assert.False(t, rec.got.Repair().Found("x"))
}

// TestRepairOfAPluginWithoutRepairFindsNothing: a plugin that keeps nothing a reload
// removes is not called.
func TestRepairOfAPluginWithoutRepairFindsNothing(t *testing.T) {
	rec := &recorder{}
	missing, err := InvokeRepair(context.Background(), rec.plugin(), repairArgs, []byte(conf), nil, false)
	require.NoError(t, err)
	assert.Empty(t, missing)
	assert.Nil(t, rec.got)
}
