package link_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestHelpersRecordTheirStepsForTheInvocationLog(t *testing.T) {
	t.Parallel()
	testns.RequireRoot(t)
	hostNS, contNS := testns.New(t), testns.New(t)
	rec := steps.New(time.Now(), tracectx.Span{})
	ctx := steps.With(context.Background(), rec)
	host, err := link.Open(hostNS.Path)
	require.NoError(t, err)
	defer host.Close()
	cont, err := link.OpenContainer(ctx, contNS.Path)
	require.NoError(t, err)
	defer cont.Close()

	_, err = link.CreateVeth(host, cont, link.VethOptions{IfName: "eth0"})
	require.NoError(t, err)
	contNS.Run(t, func() error { return sysctl.Set("net/ipv6/conf/eth0/accept_dad", "0") })
	require.NoError(t, link.ConfigureIface(cont, "eth0", dualStack()))
	_, err = link.WaitOperUp(cont, "eth0", 5*time.Second)
	require.NoError(t, err)
	var p background.Pending
	require.NoError(t, cont.DeleteInBackground(background.WithPending(ctx, &p), "eth0"))
	require.NoError(t, p.Wait())

	var names []string
	for _, s := range rec.Steps() {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{steps.LinkCreate, steps.LinkUp, steps.Addresses, steps.WaitDAD, steps.Routes, steps.WaitLinkUp,
		steps.LinkDelete}, names)
}
