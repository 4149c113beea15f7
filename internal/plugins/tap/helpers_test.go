package tap

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// env is one test's world: the plugin runs in host and makes taps in cont.
type env struct {
	t          testing.TB
	host, cont *testns.NS
	ipamDir    string
	// netns overrides cont.Path as CNI_NETNS when set (plugintest.NetnsOf).
	netns   string
	cniArgs string
	stderr  bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	host, cont := pt.HostAndContainer(t)
	return &env{t: t, host: host, cont: cont, ipamDir: t.TempDir()}
}

// config builds a tap config; extra keys are merged in at the top level.
func (e *env) config(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	return pt.Config(t, map[string]any{"cniVersion": "1.1.0", "name": "tapnet", "type": "tap"}, extra)
}

func (e *env) withIPAM(extra map[string]any, subnet string) map[string]any {
	return pt.Merged(map[string]any{"ipam": pt.HostLocal(e.ipamDir, subnet)}, extra)
}

func (e *env) netnsPath() string {
	return pt.NetnsOf(e.cont, e.netns)
}

func (e *env) invoke(cmd string, config []byte) (*result.Result, error) {
	return pt.InvokeLogged(e.t, e.host, Plugin(), pt.Call{Command: cmd, ContainerID: "c1", Netns: e.netnsPath(),
		IfName: "tap0", Args: e.cniArgs, Config: config}, &e.stderr)
}

func (e *env) add(t *testing.T, config []byte) *result.Result {
	t.Helper()
	res, err := e.invoke(skel.CmdAdd, config)
	require.NoError(t, err)
	return res
}

// tapIn returns the tap called name inside n, nil when there is no such link.
func tapIn(t *testing.T, n *testns.NS, name string) *netlink.Tuntap {
	t.Helper()
	l := pt.LinkIn(t, n, name)
	if l == nil {
		return nil
	}
	tt, ok := l.(*netlink.Tuntap)
	require.True(t, ok, "%s is a %s", name, l.Type())
	return tt
}

func (e *env) reservations(t *testing.T) []string {
	return pt.Reservations(t, filepath.Join(e.ipamDir, "tapnet"))
}

// attachAs runs the tapattach helper inside cont as uid:gid and returns its exit
// status: 0 attached, 3 refused (EPERM).
func (e *env) attachAs(t *testing.T, helper, name string, uid, gid int, multi bool) int {
	t.Helper()
	mode := "single"
	if multi {
		mode = "multi"
	}
	var code int
	var stderr bytes.Buffer
	e.cont.Run(t, func() error {
		cmd := exec.Command(helper, name, strconv.Itoa(uid), strconv.Itoa(gid), mode)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
			return nil
		}
		return err
	})
	require.NotEqual(t, 1, code, stderr.String())
	return code
}

func tapAttachHelper(t *testing.T) string {
	t.Helper()
	bin, err := testns.BuildHelper("./testdata/tapattach")
	require.NoError(t, err)
	if !testns.Prebuilt() {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	}
	return bin
}
