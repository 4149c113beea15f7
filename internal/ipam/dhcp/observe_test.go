package dhcp_test

import (
	"bytes"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcptest"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/testbed/testns"
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

// waitLine polls the log at path for a line that satisfies cond.
func waitLine(t *testing.T, path string, timeout time.Duration, cond func(invlog.Entry) bool) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(500 * time.Millisecond) {
		if slices.ContainsFunc(invlogtest.Lines(t, path), cond) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// renewalOf matches a successful RENEW line of the lease of addr.
func renewalOf(addr netip.Prefix) func(invlog.Entry) bool {
	return func(e invlog.Entry) bool {
		return e.Command == "RENEW" && e.Error == nil && e.Result != nil && len(e.Result.IPs) == 1 &&
			e.Result.IPs[0].Address == addr.String()
	}
}

// TestLeaseEventsOfBothFamiliesAreLoggedAndCounted: the upkeep of a dual-stack pod's
// leases writes a RENEW line for each family, naming its lease's address (both renew at
// T1, half dnsmasq's shortest lease: a minute), and the daemon's counters add both
// families up. (About a minute.)
func TestLeaseEventsOfBothFamiliesAreLoggedAndCounted(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "cni.log")
	w := newWorld(t, dhcptest.Options{IPv6: true, LeaseTime: 2 * time.Minute}, "-logfile", logFile)
	conf := w.conf(map[string]any{"ipv6": true})
	c := w.newCtr()
	v4, v6 := families(t, w.add(c, conf))
	require.True(t, v4.IsValid() && v6.IsValid())
	lines := invlogtest.Lines(t, logFile)
	require.NotEmpty(t, lines)
	add := lines[0]
	require.Equal(t, "ADD", add.Command)
	require.NotNil(t, add.Result)
	assert.Len(t, add.Result.IPs, 2, "the ADD line has both leases' addresses")

	assert.True(t, waitLine(t, logFile, 90*time.Second, renewalOf(v4)), "a DHCPv4 RENEW line")
	assert.True(t, waitLine(t, logFile, 30*time.Second, renewalOf(v6)), "a DHCPv6 RENEW line")
	out := w.status(t)
	assert.Contains(t, out, "leases held          2\n")
	assert.Contains(t, out, "allocations          2\n", "a lease per family")
	assert.Contains(t, out, "renewals             2\n", "one renewal per family")
	assert.Contains(t, out, "renewal failures     0\n")

	_, err := w.bridgeCmd("DEL", c, conf, "")
	require.NoError(t, err)
	assert.Contains(t, w.status(t), "releases             2\n")
}

// TestAFailedDualStackAddIsCountedPerLease: the DHCPv4 lease a dual-stack ADD got is an
// allocation, given back (a release) when the DHCPv6 one fails (an allocation failure).
func TestAFailedDualStackAddIsCountedPerLease(t *testing.T) {
	w := newWorld(t, dhcptest.Options{}, "-resendtimeout", "4s")
	_, err := w.bridgeCmd("ADD", w.newCtr(), w.conf(map[string]any{"ipv6": true}), "")
	require.Error(t, err)
	out := w.status(t)
	for _, line := range []string{"leases held          0\n", "allocations          1\n", "allocation failures  1\n", "releases             1\n"} {
		assert.Contains(t, out, line)
	}
}
