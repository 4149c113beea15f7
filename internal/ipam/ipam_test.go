package ipam

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/invoke"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// extIPAM is the external IPAM stand-in, built once per test process.
var extIPAM = testns.NewHelper("./testdata/extipam")

func TestMain(m *testing.M) { extIPAM.Main(m) }

// extIPAMDir returns a CNI_PATH directory holding the stand-in external IPAM "ext-ipam".
func extIPAMDir(t *testing.T) string {
	t.Helper()
	bin, err := extIPAM.Path()
	require.NoError(t, err, "building testdata/extipam")
	dir := t.TempDir()
	require.NoError(t, os.Symlink(bin, filepath.Join(dir, "ext-ipam")))
	return dir
}

// standIn is a main plugin as bridge or ptp would write it: IPAM first, its release
// pushed on the rollback stack, then its own work, which fails when the config says so.
func standIn() *skel.Plugin {
	return &skel.Plugin{
		Name:     "stand-in",
		Versions: []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"},
		Add: func(req *skel.Request) (_ *result.Result, err error) {
			var undo rollback.Stack
			defer undo.OnError(&err)
			res, err := Add(req)
			if err != nil {
				return nil, err
			}
			undo.Push("release IPAM", Release(req))
			var own struct {
				FailAfterIPAM bool `json:"failAfterIPAM"`
			}
			if err := json.Unmarshal(req.Config, &own); err != nil {
				return nil, err
			}
			if own.FailAfterIPAM {
				return nil, cnierror.New(cnierror.CodeInternal, "stand-in: link setup failed")
			}
			idx := res.AddInterface(result.Interface{Name: req.Args.IfName, Sandbox: req.Args.Netns})
			for i := range res.IPs {
				res.IPs[i].Interface = &idx
			}
			return res, nil
		},
		Del:    Del,
		Check:  Check,
		GC:     GC,
		Status: Status,
	}
}

type call struct {
	t       *testing.T
	version string
	ipam    map[string]any
	extra   map[string]any
	env     []string
	path    []string
	stderr  bytes.Buffer
}

func (c *call) config() []byte {
	m := map[string]any{"cniVersion": c.version, "name": "delegation", "type": "stand-in", "ipam": c.ipam}
	for k, v := range c.extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(c.t, err)
	return b
}

func (c *call) run(cmd string) (*result.Result, error) {
	args := skel.Args{Command: cmd, ContainerID: "ctr1", Netns: "/var/run/netns/absent", IfName: "eth0",
		Path: c.path, Env: c.env}
	return skel.Invoke(context.Background(), standIn(), args, c.config(), &c.stderr)
}

func newCall(t *testing.T, ipam map[string]any) *call {
	return &call{t: t, version: "1.1.0", ipam: ipam, extra: map[string]any{}, path: []string{"/nonexistent"}}
}

func reservations(t *testing.T, dir string) []string {
	return pt.Reservations(t, dir)
}

func TestBuiltinHostLocalRunsInProcess(t *testing.T) {
	data := t.TempDir()
	c := newCall(t, map[string]any{"type": "host-local", "subnet": "10.66.0.0/24", "dataDir": data})
	res, err := c.run(skel.CmdAdd)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", res.CNIVersion)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.66.0.2/24", res.IPs[0].Address.String())
	assert.Equal(t, []string{"10.66.0.2"}, reservations(t, filepath.Join(data, "delegation")))
	_, err = c.run(skel.CmdCheck)
	require.NoError(t, err)
	_, err = c.run(skel.CmdStatus)
	require.NoError(t, err)
	_, err = c.run(skel.CmdDel)
	require.NoError(t, err)
	assert.Empty(t, reservations(t, filepath.Join(data, "delegation")))
	_, err = c.run(skel.CmdCheck)
	assert.ErrorContains(t, err, "Failed to find address added by container ctr1", "CHECK after DEL fails")
	_, err = c.run(skel.CmdDel)
	assert.NoError(t, err, "a second DEL succeeds")
}

func TestFailureAfterIPAMReleasesTheReservation(t *testing.T) {
	data := t.TempDir()
	c := newCall(t, map[string]any{"type": "host-local", "subnet": "10.66.0.0/24", "dataDir": data})
	c.extra["failAfterIPAM"] = true
	_, err := c.run(skel.CmdAdd)
	require.ErrorContains(t, err, "link setup failed")
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err), "the main plugin's error, not the release's")
	assert.Empty(t, reservations(t, filepath.Join(data, "delegation")), "rollback released the address")

	c.extra["failAfterIPAM"] = false
	res, err := c.run(skel.CmdAdd)
	require.NoError(t, err, "no duplicate-allocation leftover from the failed ADD")
	require.Len(t, res.IPs, 1)
	assert.Equal(t, []string{res.IPs[0].Address.Addr().String()}, reservations(t, filepath.Join(data, "delegation")))
}

func TestExternalIPAMIsExecedWithTheSameEnvironmentAndFullConfig(t *testing.T) {
	dir := extIPAMDir(t)
	record := filepath.Join(t.TempDir(), "record")
	c := newCall(t, map[string]any{"type": "ext-ipam", "record": record})
	c.path = []string{"/nonexistent", dir}
	c.env = []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=ctr1", "CNI_NETNS=/var/run/netns/absent", "CNI_IFNAME=eth0",
		"CNI_PATH=/nonexistent:" + dir, "CNI_ARGS=", "PATH=/usr/bin:/bin", "MY_VAR=kept"}
	res, err := c.run(skel.CmdAdd)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", res.CNIVersion, "converted to the config's version")
	require.Len(t, res.IPs, 1)
	assert.Equal(t, "10.77.0.5/24", res.IPs[0].Address.String())
	assert.Equal(t, "10.77.0.1", res.IPs[0].Gateway.String())
	require.NotNil(t, res.IPs[0].Interface, "the stand-in attached its interface")
	require.Len(t, res.Routes, 1, "the plugin's routes survive the conversion")
	assert.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
	assert.Equal(t, []string{"10.77.0.53"}, res.DNS.Nameservers, "and so does its DNS")
	assert.Contains(t, c.stderr.String(), "extipam: called for ADD", "stderr passed through")

	_, err = c.run(skel.CmdDel)
	require.NoError(t, err)
	recs := readRecords(t, record)
	require.Len(t, recs, 2)
	assert.Equal(t, string(c.config()), recs[0].Stdin, "the full network config on stdin")
	assert.ElementsMatch(t, c.env, recs[0].Env, "the same environment for ADD")
	wantDel := append([]string{"CNI_COMMAND=DEL"}, c.env[1:]...)
	assert.ElementsMatch(t, wantDel, recs[1].Env, "only CNI_COMMAND changes for DEL")
}

type record struct {
	Env   []string `json:"env"`
	Stdin string   `json:"stdin"`
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	require.FileExists(t, path)
	return pt.Records[record](t, path)
}

func TestBuiltinAndExternalResultsHaveTheSameShape(t *testing.T) {
	dir := extIPAMDir(t)
	in := newCall(t, map[string]any{"type": "host-local", "subnet": "10.77.0.0/24", "dataDir": t.TempDir(),
		"routes": []any{map[string]any{"dst": "0.0.0.0/0"}}})
	ext := newCall(t, map[string]any{"type": "ext-ipam"})
	ext.path = []string{dir}
	for _, v := range []string{"0.3.1", "1.0.0", "1.1.0"} {
		in.version, ext.version = v, v
		a, err := in.run(skel.CmdAdd)
		require.NoError(t, err)
		b, err := ext.run(skel.CmdAdd)
		require.NoError(t, err)
		assert.Equal(t, v, a.CNIVersion)
		assert.Equal(t, v, b.CNIVersion)
		assert.Equal(t, len(a.IPs), len(b.IPs))
		assert.Equal(t, len(a.Interfaces), len(b.Interfaces))
		assert.Equal(t, a.Routes, b.Routes)
		_, err = in.run(skel.CmdDel)
		require.NoError(t, err)
	}
}

func TestExternalResultWithoutVersionTakesTheConfigVersion(t *testing.T) {
	c := newCall(t, map[string]any{"type": "ext-ipam", "mode": "noversion"})
	c.path = []string{extIPAMDir(t)}
	c.version = "0.4.0"
	res, err := c.run(skel.CmdAdd)
	require.NoError(t, err)
	assert.Equal(t, "0.4.0", res.CNIVersion)
	assert.Equal(t, "10.77.0.5/24", res.IPs[0].Address.String())
}

func TestExternalIPAMErrorKeepsItsCode(t *testing.T) {
	c := newCall(t, map[string]any{"type": "ext-ipam", "mode": "error"})
	c.path = []string{extIPAMDir(t)}
	_, err := c.run(skel.CmdAdd)
	pt.RequireRefused(t, err, cnierror.CodeTryAgainLater, "pool busy")
}

func TestExternalIPAMFailingSilentlyReportsItsStderr(t *testing.T) {
	c := newCall(t, map[string]any{"type": "ext-ipam", "mode": "silent"})
	c.path = []string{extIPAMDir(t)}
	_, err := c.run(skel.CmdAdd)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "extipam: something broke")
	assert.Equal(t, cnierror.CodeInternal, cnierror.Code(err), "a plugin dying without a CNI error is 999: %v", err)
}

func TestIPAMTypeErrors(t *testing.T) {
	cases := []struct {
		name string
		ipam map[string]any
		path []string
		want string
		code uint
	}{
		{"missing type", map[string]any{}, nil, "ipam.type", cnierror.CodeInvalidConfig},
		{"path separator", map[string]any{"type": "../bin/host-local"}, nil, "must not contain a path separator", cnierror.CodeInvalidConfig},
		{"not on CNI_PATH", map[string]any{"type": "no-such-ipam"}, nil, `failed to find plugin "no-such-ipam"`, cnierror.CodeInvalidConfig},
		{"directory is no plugin", map[string]any{"type": "sub"}, nil, `failed to find plugin "sub"`, cnierror.CodeInvalidConfig},
	}
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCall(t, tc.ipam)
			c.path = []string{root}
			_, err := c.run(skel.CmdAdd)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, cnierror.Code(err))
		})
	}
}

// TestDelAndGCOfAnIPAMTypeThatCannotRunSucceed: a type on no directory of CNI_PATH (or
// no plugin name at all) can have reserved nothing, so DEL and GC succeed, saying why;
// refused, they failed the main plugin's DEL for ever. CHECK still fails.
func TestDelAndGCOfAnIPAMTypeThatCannotRunSucceed(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	for _, typ := range []string{"no-such-ipam", "sub", "../bin/host-local"} {
		t.Run(typ, func(t *testing.T) {
			c := newCall(t, map[string]any{"type": typ})
			c.path = []string{root}
			for _, cmd := range []string{skel.CmdDel, skel.CmdGC} {
				_, err := c.run(cmd)
				require.NoError(t, err, cmd)
				assert.Contains(t, c.stderr.String(), "ipam "+typ+": "+cmd+": nothing to release, no ADD with this config can have run it")
			}
			_, err := c.run(skel.CmdCheck)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
		})
	}
}

func TestFindInPathTakesTheFirstRegularFile(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(b, "x"), nil, 0o600))
	require.NoError(t, os.Symlink(filepath.Join(b, "x"), filepath.Join(a, "x")))
	got, err := invoke.FindInPath("x", []string{"/nonexistent", a, b})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(a, "x"), got, "a symlink to a regular file counts")
}

// The likeliest reason an ADD fails is that its deadline passed: the release of the
// reservation must still reach an exec'd IPAM plugin then.
func TestReleaseRunsEvenWhenTheRequestContextIsDone(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"delegation","type":"standin","ipam":{"type":"ext-ipam","record":%q}}`, record)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := (&skel.Request{
		Args:   skel.Args{Command: skel.CmdAdd, ContainerID: "ctr1", Netns: "/var/run/netns/absent", IfName: "eth0", Path: []string{extIPAMDir(t)}},
		Config: []byte(conf),
		Net:    skel.NetConf{CNIVersion: "1.1.0", Name: "delegation", IPAM: skel.IPAM{Type: "ext-ipam"}},
	}).WithContext(ctx)
	require.Error(t, Del(req), "a plain DEL with the spent context cannot run the plugin")
	require.NoError(t, Release(req)())
	calls, err := os.ReadFile(record)
	require.NoError(t, err)
	assert.Contains(t, string(calls), "CNI_COMMAND=DEL")
}

// traceOf returns the TRACEPARENT a record's environment holds.
func traceOf(r record) string {
	for _, kv := range r.Env {
		if v, ok := strings.CutPrefix(kv, "TRACEPARENT="); ok {
			return v
		}
	}
	return ""
}

func TestExecedIPAMRunsUnderTheIPAMStepsSpan(t *testing.T) {
	const runtimeSpan = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	dir := extIPAMDir(t)
	record := filepath.Join(t.TempDir(), "record")
	logFile := filepath.Join(t.TempDir(), "cni.log")
	c := newCall(t, map[string]any{"type": "ext-ipam", "record": record})
	c.path = []string{dir}
	c.env = []string{"PATH=/usr/bin:/bin", "TRACEPARENT=" + runtimeSpan}

	_, err := c.run(skel.CmdAdd)
	require.NoError(t, err)
	c.extra["log"] = map[string]any{"file": logFile}
	_, err = c.run(skel.CmdAdd)
	require.NoError(t, err)

	recs := readRecords(t, record)
	require.Len(t, recs, 2)
	assert.Equal(t, runtimeSpan, traceOf(recs[0]), "log off: the runtime's context is inherited unchanged, as the reference plugins do")
	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 1)
	require.Equal(t, steps.IPAM, lines[0].Steps[0].Name)
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+lines[0].Steps[0].SpanID+"-01", traceOf(recs[1]),
		"log on: the exec'd delegate is a child of the IPAM step")
	assert.Equal(t, "00f067aa0ba902b7", lines[0].ParentSpanID)
}
