package tap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/skel"
	"github.com/cnikit/cni/internal/testns"
)

// env is one test's world: the plugin runs in host and makes taps in cont.
type env struct {
	host, cont *testns.NS
	ipamDir    string
	// netns overrides cont.Path as CNI_NETNS when set (use gone for "no netns").
	netns   string
	cniArgs string
	stderr  bytes.Buffer
}

const gone = "\x00gone"

func newEnv(t *testing.T) *env {
	t.Helper()
	testns.RequireRoot(t)
	return &env{host: testns.NewWithLoopback(t), cont: testns.NewWithLoopback(t), ipamDir: t.TempDir()}
}

// config builds a tap config; extra keys are merged in at the top level.
func (e *env) config(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	conf := map[string]any{"cniVersion": "1.1.0", "name": "tapnet", "type": "tap"}
	for k, v := range extra {
		conf[k] = v
	}
	b, err := json.Marshal(conf)
	require.NoError(t, err)
	return b
}

func (e *env) withIPAM(extra map[string]any, subnet string) map[string]any {
	out := map[string]any{"ipam": map[string]any{"type": "host-local", "dataDir": e.ipamDir,
		"ranges": [][]map[string]string{{{"subnet": subnet}}}}}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func (e *env) netnsPath() string {
	switch e.netns {
	case "":
		return e.cont.Path
	case gone:
		return ""
	}
	return e.netns
}

func (e *env) invoke(cmd string, config []byte) (*result.Result, error) {
	var res *result.Result
	err := e.host.Do(func() error {
		var err error
		res, err = skel.Invoke(context.Background(), Plugin(),
			skel.Args{Command: cmd, ContainerID: "c1", Netns: e.netnsPath(), IfName: "tap0", CNIArgs: e.cniArgs,
				Path: []string{"/nonexistent"}},
			config, &e.stderr)
		return err
	})
	return res, err
}

func (e *env) add(t *testing.T, config []byte) *result.Result {
	t.Helper()
	res, err := e.invoke(skel.CmdAdd, config)
	require.NoError(t, err)
	return res
}

func withPrev(t *testing.T, config []byte, res *result.Result) []byte {
	t.Helper()
	var conf map[string]any
	require.NoError(t, json.Unmarshal(config, &conf))
	var buf strings.Builder
	require.NoError(t, res.Print(&buf))
	conf["prevResult"] = json.RawMessage(buf.String())
	b, err := json.Marshal(conf)
	require.NoError(t, err)
	return b
}

// tapIn returns the tap called name inside n, nil when there is no such link.
func tapIn(t *testing.T, n *testns.NS, name string) *netlink.Tuntap {
	t.Helper()
	l, err := n.Handle(t).LinkByName(name)
	if err != nil {
		return nil
	}
	tt, ok := l.(*netlink.Tuntap)
	require.True(t, ok, "%s is a %s", name, l.Type())
	return tt
}

func names(t *testing.T, n *testns.NS) []string {
	t.Helper()
	ls, err := n.Handle(t).LinkList()
	require.NoError(t, err)
	var out []string
	for _, l := range ls {
		out = append(out, l.Attrs().Name)
	}
	return out
}

func (e *env) reservations(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.ipamDir, "tapnet"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, en := range entries {
		if _, err := netip.ParseAddr(en.Name()); err == nil {
			out = append(out, en.Name())
		}
	}
	return out
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
