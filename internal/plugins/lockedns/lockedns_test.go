package lockedns_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func request(netns string) *skel.Request { return &skel.Request{Args: skel.Args{Netns: netns}} }

// add is Add, checking that a success passes the prevResult on as a copy.
func add(req *skel.Request, change func(*link.NS) error) error {
	req.PrevResult = &result.Result{CNIVersion: "1.1.0", Interfaces: []result.Interface{{Name: "eth0"}}}
	res, err := lockedns.Add(req, change)
	if err == nil && (res == req.PrevResult || !reflect.DeepEqual(res, req.PrevResult)) {
		return fmt.Errorf("Add passed on %+v, not a copy of the prevResult", res)
	}
	return err
}

// del is Del with a key that is always there.
func del(req *skel.Request, remove func(*link.NS) error) error {
	key := func(*skel.Request) (int, error) { return 7, nil }
	return lockedns.Del(req, "test", key, func(cont *link.NS, k int) error {
		if k != 7 {
			return errors.New("Del did not hand the key on")
		}
		return remove(cont)
	})
}

// While change runs, another open of the namespace waits for the lock; it gets it once
// Add or Del returned, and change's error is theirs.
func TestChangeRunsUnderTheNamespaceLock(t *testing.T) {
	testns.RequireRoot(t)
	for name, run := range map[string]func(*skel.Request, func(*link.NS) error) error{"Add": add, "Del": del} {
		t.Run(name, func(t *testing.T) {
			n := testns.New(t)
			other, err := link.Open(n.Path)
			require.NoError(t, err)
			defer other.Close()

			got := make(chan struct{})
			boom := errors.New("boom")
			err = run(request(n.Path), func(cont *link.NS) error {
				go func() {
					if unlock, err := other.Lock(); err == nil {
						unlock()
					}
					close(got)
				}()
				select {
				case <-got:
					t.Error("another open of the namespace got its lock while change ran")
				case <-time.After(200 * time.Millisecond):
				}
				return boom
			})
			require.ErrorIs(t, err, boom)
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the lock was not released on return")
			}
		})
	}
}

// ADD into a namespace that is not there is the spec's code 3; DEL has nothing to do,
// nor with a config ADD refuses, which it says on stderr.
func TestMissingNamespaceOrKey(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	called := false
	change := func(*link.NS) error { called = true; return nil }

	err := add(request(gone), change)
	var cerr *cnierror.Error
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, cnierror.CodeUnknownContainer, cerr.Code)

	assert.NoError(t, del(request(gone), change))
	assert.NoError(t, del(request(""), change))

	var stderr bytes.Buffer
	req := request(gone)
	req.Stderr = &stderr
	refused := func(*skel.Request) (string, error) { return "", errors.New("bad name") }
	assert.NoError(t, lockedns.Del(req, "test", refused, func(*link.NS, string) error { called = true; return nil }))
	assert.Equal(t, "test: nothing to delete, ADD refuses this config: bad name\n", stderr.String())
	assert.False(t, called, "change ran without a namespace or key")
}

// A change that succeeds passes the prevResult on (add checks it is a copy).
func TestAddPassesThePrevResultOn(t *testing.T) {
	testns.RequireRoot(t)
	n := testns.New(t)
	ran := false
	require.NoError(t, add(request(n.Path), func(*link.NS) error { ran = true; return nil }))
	assert.True(t, ran)
}
