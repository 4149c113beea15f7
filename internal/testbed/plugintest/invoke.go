package plugintest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// SkelArgs are the skel.Args of c, CNI_PATH "/nonexistent" when c.Path is empty: an
// in-process call that would exec anything finds nothing.
func (c Call) SkelArgs() skel.Args {
	path := c.Path
	if path == "" {
		path = "/nonexistent"
	}
	return skel.Args{Command: c.Command, ContainerID: c.ContainerID, Netns: c.Netns, IfName: c.IfName,
		CNIArgs: c.Args, Path: filepath.SplitList(path), Env: c.Env}
}

// HostAndContainer makes the two namespaces of most plugin tests, both with lo up: the
// host, where the plugin runs, and a container it configures. It skips the test
// without root.
func HostAndContainer(t testing.TB) (host, container *testns.NS) {
	t.Helper()
	testns.RequireRoot(t)
	return testns.NewWithLoopback(t), testns.NewWithLoopback(t)
}

// NoNetns, as the netns override of NetnsOf, stands for a call without CNI_NETNS.
const NoNetns = "\x00none"

// NetnsOf is the CNI_NETNS of a test's call: the container's path, unless override
// names another (a path that is no namespace, or NoNetns for none).
func NetnsOf(container *testns.NS, override string) string {
	switch override {
	case "":
		return container.Path
	case NoNetns:
		return ""
	}
	return override
}

// Invoke runs c in-process: p's callbacks through skel, exactly as the cni binary
// would, inside ns (the test's own namespace when nil), the plugin's stderr to os.Stderr.
func Invoke(t testing.TB, ns *testns.NS, p *skel.Plugin, c Call) (*result.Result, error) {
	t.Helper()
	return InvokeLogged(t, ns, p, c, os.Stderr)
}

// InvokeLogged is Invoke with the plugin's stderr to stderr.
func InvokeLogged(t testing.TB, ns *testns.NS, p *skel.Plugin, c Call, stderr io.Writer) (*result.Result, error) {
	t.Helper()
	var res *result.Result
	var err error
	run := func() error {
		res, err = skel.Invoke(context.Background(), p, c.SkelArgs(), c.Config, stderr)
		return nil
	}
	if ns == nil {
		_ = run()
	} else {
		ns.Run(t, run)
	}
	return res, err
}
