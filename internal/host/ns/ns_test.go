package ns_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestOpenAcceptsANamespace(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	h, err := ns.Open(n.Path)
	require.NoError(t, err)
	h.Close()
}

// A runtime's unmounted netns leaves a plain file at the path: that is a namespace
// that no longer exists, not an error that would make DEL fail forever.
func TestOpenTreatsAPlainFileAsGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leftover")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err := ns.Open(path)
	assert.True(t, errors.Is(err, ns.ErrNotExist), "got %v", err)
	_, err = ns.Open(filepath.Join(t.TempDir(), "missing"))
	assert.True(t, errors.Is(err, ns.ErrNotExist), "got %v", err)
}

func TestDoHandleRunsInsideTheNamespace(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	var inside, outside string
	target, err := ns.Open(n.Path)
	require.NoError(t, err)
	defer target.Close()
	require.NoError(t, ns.DoHandle(target, func() error {
		var err error
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}))
	outside, err = os.Readlink("/proc/thread-self/ns/net")
	require.NoError(t, err)
	assert.NotEqual(t, outside, inside)
}

// TestOpenOfAFIFOReturnsAtOnce: a FIFO where the netns should be (opened for reading it
// would block until a writer comes, hanging every plugin) is a file that is no namespace.
func TestOpenOfAFIFOReturnsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := ns.Open(path)
		done <- err
	}()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ns.ErrNotExist)
	case <-time.After(10 * time.Second):
		t.Fatal("Open of a FIFO blocks")
	}
}
