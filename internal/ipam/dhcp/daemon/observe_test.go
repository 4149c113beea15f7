package daemon

import (
	"errors"
	"log"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/invlog"
	"github.com/cnikit/cni/internal/invlog/invlogtest"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
)

func TestRenewalsAreCountedAndLogged(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "cni.log")
	opts := Defaults()
	opts.StateDir = filepath.Join(t.TempDir(), "leases")
	opts.Log = &invlog.Config{File: logFile}
	var logs syncBuffer
	d, err := New(opts, log.New(&logs, "", 0))
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	h := &held{rec: &leasefile.Record{ClientID: "c1/n/eth0", ContainerID: "c1", Network: "n", IfName: "eth0", Netns: "/run/netns/c1"}}

	d.renewed(h, "renew", time.Now(), nil)
	d.renewed(h, "rebind", time.Now(), errors.New("no answer"))
	_, err = logged(d, "DEL", d.Release)(&wire.CmdArgs{ContainerID: "c1", IfName: "eth0", StdinData: []byte(`{"name":"n","cniVersion":"1.0.0"}`)})
	require.NoError(t, err)

	c, err := d.Counters(&wire.Empty{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), c.Renewals)
	assert.Equal(t, int64(1), c.RenewalFailures)
	assert.Zero(t, c.Held)
	assert.WithinDuration(t, time.Now(), c.Since, time.Minute)

	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"RENEW", "REBIND", "DEL"}, []string{lines[0].Command, lines[1].Command, lines[2].Command})
	assert.Equal(t, "n", lines[0].Network)
	assert.Nil(t, lines[0].Error)
	require.NotNil(t, lines[1].Error)
	assert.Equal(t, "no answer", lines[1].Error.Msg)
	assert.Equal(t, "1.0.0", lines[2].CNIVersion)
	assert.Equal(t, "dhcp-daemon", lines[2].Plugin)
}
