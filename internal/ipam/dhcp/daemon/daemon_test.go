package daemon

import (
	"bytes"
	"log"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/leasefile"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestDaemon(t *testing.T) (*Daemon, *syncBuffer) {
	t.Helper()
	return newTestDaemonWith(t, Defaults())
}

// newTestDaemonWith is newTestDaemon with opts, its state dir a temp dir.
func newTestDaemonWith(t *testing.T, opts Options) (*Daemon, *syncBuffer) {
	t.Helper()
	var logs syncBuffer
	opts.StateDir = filepath.Join(t.TempDir(), "leases")
	d, err := New(opts, log.New(&logs, "", 0))
	require.NoError(t, err)
	t.Cleanup(d.Stop)
	return d, &logs
}

func TestAPanicInALeaseGoroutineIsLoggedAndTheDaemonGoesOn(t *testing.T) {
	d, logs := newTestDaemon(t)
	h := &held{rec: &leasefile.Record{ClientID: "broken/n/eth0"}} // no binding: upkeep dereferences nil
	d.mu.Lock()
	d.leases[h.rec.ClientID] = h
	d.mu.Unlock()
	d.start(h, false)
	<-h.done

	assert.Contains(t, logs.String(), "broken/n/eth0: lease upkeep panicked")
	_, err := d.Status(&wire.CmdArgs{})
	assert.NoError(t, err)
	assert.Equal(t, 1, d.Held(), "the lease stays held for DEL to release")
}

func TestDaemonRefusesHostileAttachments(t *testing.T) {
	d, _ := newTestDaemon(t)
	conf := []byte(`{"name":"n","ipam":{"type":"dhcp"}}`)
	for name, args := range map[string]wire.CmdArgs{
		"container id": {ContainerID: "../../x", IfName: "eth0", Netns: "/x", StdinData: conf},
		"ifname":       {ContainerID: "c", IfName: "a/b", Netns: "/x", StdinData: conf},
		"no netns":     {ContainerID: "c", IfName: "eth0", StdinData: conf},
		"config":       {ContainerID: "c", IfName: "eth0", Netns: "/x", StdinData: []byte(`{"name":"n","ipam":{"request":[{"option":"x"}]}}`)},
	} {
		_, err := d.Allocate(&args)
		require.Error(t, err, name)
		assert.NotZero(t, cnierror.Code(err), "%s: %v", name, err)
	}
	assert.Zero(t, d.Held())
}

func TestReleaseOfAnUnknownAttachmentSucceeds(t *testing.T) {
	d, _ := newTestDaemon(t)
	_, err := d.Release(&wire.CmdArgs{ContainerID: "c", IfName: "eth0", StdinData: []byte(`{"name":"n"}`)})
	assert.NoError(t, err)
	_, err = d.Check(&wire.CmdArgs{ContainerID: "c", IfName: "eth0", StdinData: []byte(`{"name":"n","ipam":{"type":"dhcp"}}`)})
	assert.ErrorContains(t, err, "holds no DHCPv4 lease")
}

// Stop closes the lease directory New opened (it stayed open for the life of the
// process before), and a second Stop is harmless.
func TestStopClosesTheLeaseDir(t *testing.T) {
	d, _ := newTestDaemon(t)
	dir := d.opts.StateDir
	require.True(t, hasOpenFD(t, dir), "New keeps the lease dir open")
	d.Stop()
	assert.False(t, hasOpenFD(t, dir), "Stop closed it")
	d.Stop()
}

func hasOpenFD(t *testing.T, path string) bool {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			return true
		}
	}
	return false
}
