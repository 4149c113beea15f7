package dhcp_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/invlog/invlogtest"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/testns"
)

// status runs `cni dhcp status` against the world's daemon.
func (w *world) status(t *testing.T, flags ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(testns.Binary(t), append([]string{"dhcp", "status", "-socketpath", w.daemon.Socket}, flags...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	return out.String()
}

func TestDaemonLogsInTheInvocationLogFormatAndServesItsCounters(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "cni.log")
	w := newWorld(t, dhcptest.Options{}, "-logfile", logFile)
	c := w.newCtr()
	conf := w.conf(nil)
	w.add(c, conf)
	_, err := w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)

	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 2, "one line per daemon call")
	add, del := lines[0], lines[1]
	assert.Equal(t, "dhcp-daemon", add.Plugin)
	assert.Equal(t, "ADD", add.Command)
	assert.Equal(t, "dhcpnet", add.Network)
	assert.Equal(t, c.id, add.ContainerID)
	assert.Equal(t, "eth0", add.IfName)
	require.NotNil(t, add.Result)
	assert.Equal(t, c.res.IPs[0].Address.String(), add.Result.IPs[0].Address)
	assert.Greater(t, add.DurationMs, 0.0)
	assert.Equal(t, "DEL", del.Command)
	assert.Nil(t, del.Error)

	out := w.status(t)
	assert.Contains(t, out, "leases held          0\n")
	assert.Contains(t, out, "allocations          1\n")
	assert.Contains(t, out, "releases             1\n")
	prom := w.status(t, "-prometheus")
	assert.Contains(t, prom, "# TYPE cni_dhcp_allocations_total counter\ncni_dhcp_allocations_total 1\n")
	assert.Contains(t, prom, "cni_dhcp_leases_held 0\n")
	for _, line := range strings.Split(strings.TrimSpace(prom), "\n") {
		if !strings.HasPrefix(line, "#") {
			assert.True(t, strings.HasPrefix(line, "cni_dhcp_"), line)
		}
	}
}
