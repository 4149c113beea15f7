package skel

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/host/ns"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestPanicInsideANamespaceBecomesErrorJSON: namespace work runs on a goroutine of its
// own (ns.Do), out of reach of the callback's recover. Its panic used to print a stack
// trace where the runtime expects JSON, and to kill an in-process caller (this test
// binary, or the runtime embedding the chain runner). Now both entry points report code
// 999, and the process lives on.
func TestPanicInsideANamespaceBecomesErrorJSON(t *testing.T) {
	testns.RequireRoot(t)
	target := testns.New(t)
	p := &Plugin{Name: "nsboom", Versions: version.All(), Del: func(req *Request) error {
		h, err := ns.Open(target.Path)
		if err != nil {
			return err
		}
		defer h.Close()
		return ns.DoHandle(h, func() error { panic("kaboom in the netns") })
	}}

	assertPanicReported(t, runPlugin(p, env("DEL"), conf), "kaboom in the netns")

	args := Args{Command: CmdDel, ContainerID: "abc", IfName: "eth0", Path: []string{"/opt/cni/bin"}}
	_, err := Invoke(context.Background(), p, args, []byte(conf), io.Discard)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err))
}
