package bandwidth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// badLimits are limits ADD refuses (a burst without a rate).
const badLimits = `"ingressBurst":400000,"egressRate":8000000,"egressBurst":1`

func TestExecdDelIgnoresTheLimits(t *testing.T) {
	t.Parallel()
	plugin := testns.LinkPlugin(t, "bandwidth")
	host, a := newAttached(t, "ctr-bad")

	o := execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", badLimits, a.prev))
	require.True(t, pt.AssertFailed(t, o, cnierror.CodeInvalidConfig))

	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path, conf("net1", badLimits, ""))
	assert.Equal(t, 0, o.Exit, "DEL of the failed attachment: %s", o)

	// An attachment shaped with good limits is cleaned by a DEL whose limits went bad.
	o = execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", bothLimits, a.prev))
	require.Equal(t, 0, o.Exit, o.String())
	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path,
		conf("net1", `"ingressRate":"fast","egressBurst":-1`, `{"not":"a result"}`))
	assert.Equal(t, 0, o.Exit, o.String())
	assertIfb(t, host, ifbName("net1", a.cid), false, "ifb gone after DEL")
}
