package link_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// Two opens of one namespace, even through different paths, exclude each other; the
// release lets the waiter in.
func TestLockExcludesOtherOpensOfTheNamespace(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	a, err := link.Open(n.Path)
	require.NoError(t, err)
	defer a.Close()
	// The same namespace under another name, as /run/netns/x and /proc/<pid>/ns/net are.
	other := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), a.Fd())
	b, err := link.Open(other)
	require.NoError(t, err)
	defer b.Close()

	unlock, err := a.Lock()
	require.NoError(t, err)
	got := make(chan struct{})
	go func() {
		unlockB, err := b.Lock()
		if err == nil {
			unlockB()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("the second lock was granted while the first was held")
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the second lock was not granted after the release")
	}
}
