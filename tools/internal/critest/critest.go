// Package critest serves the part of a container runtime's CRI that a GC caller asks,
// ListPodSandbox, on a unix socket of a test's: the sandboxes the test says the
// runtime knows, or the error the test says it fails with.
package critest

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the CRI runtime service of a test.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu  sync.Mutex
	ids []string
	err error
}

// Set makes the runtime know the sandboxes ids (every second one not ready, as a
// stopped sandbox the runtime has not removed), or fail every list with err.
func (r *Runtime) Set(ids []string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids, r.err = ids, err
}

// ListPodSandbox answers as the runtime would.
func (r *Runtime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	resp := &runtimeapi.ListPodSandboxResponse{}
	for i, id := range r.ids {
		state := runtimeapi.PodSandboxState_SANDBOX_READY
		if i%2 == 1 {
			state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		}
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{Id: id, State: state})
	}
	return resp, nil
}

// Serve serves r on the unix socket sock until the test ends.
func Serve(t *testing.T, r *Runtime, sock string) {
	t.Helper()
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
}
