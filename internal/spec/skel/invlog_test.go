package skel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/result"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// stepper is a plugin that does its work through a "shared helper" recording one step,
// and, when delegate is set, runs delegate in-process during that step, as IPAM
// delegation does.
func stepper(delegate *Plugin, fail error) *Plugin {
	return &Plugin{
		Name: "stepper", Versions: []string{"1.0.0", "1.1.0"},
		Add: func(req *Request) (*result.Result, error) {
			t := steps.Begin(req.Context(), steps.IPAM)
			var err error
			if delegate != nil {
				_, err = Invoke(t.Context(req.Context()), delegate, req.Args, req.Config, req.Stderr)
			}
			if err == nil {
				err = fail
			}
			if t.Done(err) != nil {
				return nil, err
			}
			one := 0
			return &result.Result{Interfaces: []result.Interface{{Name: "eth0"}},
				IPs: []result.IPConfig{{Interface: &one, Address: netip.MustParsePrefix("10.1.0.2/24")}}}, nil
		},
		Del: func(*Request) error { return nil },
	}
}

func delegate() *Plugin {
	return &Plugin{Name: "delegate", Versions: []string{"1.0.0", "1.1.0"},
		Add: func(*Request) (*result.Result, error) { return &result.Result{}, nil }}
}

func logConf(logObject string) []byte {
	if logObject == "" {
		return []byte(`{"cniVersion":"1.0.0","name":"net1","type":"stepper"}`)
	}
	return []byte(`{"cniVersion":"1.0.0","name":"net1","type":"stepper","log":` + logObject + `}`)
}
func TestConfigLogObjectLogsEachInvocation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/var/run/netns/x", IfName: "eth0",
		Path: []string{"/opt/cni/bin"}, CNIArgs: "K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=prod", NetnsOverride: true}
	_, err := Invoke(context.Background(), stepper(nil, nil), args, logConf(fmt.Sprintf(`{"file":%q}`, file)), nil)
	require.NoError(t, err)
	args.Command = CmdDel
	_, err = Invoke(context.Background(), stepper(nil, nil), args, logConf(fmt.Sprintf(`{"file":%q}`, file)), nil)
	require.NoError(t, err)

	lines := invlogtest.Lines(t, file)
	require.Len(t, lines, 2)
	add := lines[0]
	assert.Equal(t, "ADD", add.Command)
	assert.Equal(t, "stepper", add.Plugin)
	assert.Equal(t, "net1", add.Network)
	assert.Equal(t, "ctr1", add.ContainerID)
	assert.Equal(t, "/var/run/netns/x", add.Netns)
	assert.Equal(t, "eth0", add.IfName)
	assert.Equal(t, "1.0.0", add.CNIVersion)
	assert.Equal(t, "web-0", add.CNIArgs["K8S_POD_NAME"])
	require.NotNil(t, add.Result)
	assert.Equal(t, "10.1.0.2/24", add.Result.IPs[0].Address)
	assert.Empty(t, add.TraceID, "no trace context given")
	require.Len(t, add.Steps, 1, "no background work, no wait for it")
	assert.Equal(t, steps.IPAM, add.Steps[0].Name)
	assert.GreaterOrEqual(t, add.DurationMs, add.Steps[0].DurationMs)
	assert.Equal(t, "DEL", lines[1].Command)
	assert.Nil(t, lines[1].Result)
}

func TestEnvironmentLogsAndConfigWins(t *testing.T) {
	dir := t.TempDir()
	node, own := filepath.Join(dir, "node.log"), filepath.Join(dir, "own.log")
	run := func(conf []byte) {
		var out bytes.Buffer
		code := Run(stepper(nil, nil), env("ADD", "CNI_LOG_FILE="+node, "CNI_NETNS_OVERRIDE=1"), bytes.NewReader(conf), &out, quiet(t))
		require.Zero(t, code, out.String())
	}
	run(logConf(""))
	run(logConf(fmt.Sprintf(`{"file":%q,"level":"debug"}`, own)))
	assert.Len(t, invlogtest.Lines(t, node), 1, "CNI_LOG_FILE logs every plugin of the node")
	assert.Len(t, invlogtest.Lines(t, own), 1, "the config's file wins over CNI_LOG_FILE")
}

// quiet is a stderr that fails the test if anything is written to it.
func quiet(t *testing.T) *failWriter { return &failWriter{t} }

type failWriter struct{ t *testing.T }

func (w *failWriter) Write(p []byte) (int, error) {
	w.t.Errorf("unexpected stderr: %s", p)
	return len(p), nil
}

// leavesWork is a plugin whose DEL leaves work running, as a link deletion does.
func leavesWork(fail error) *Plugin {
	return &Plugin{Name: "background", Versions: []string{"1.0.0"},
		Del: func(req *Request) error {
			step := steps.Begin(req.Context(), steps.LinkDelete)
			return background.Start(req.Context(), func() error {
				time.Sleep(5 * time.Millisecond)
				return step.Done(fail)
			})
		}}
}

func TestBackgroundWorkIsInTheLineWhoeverWaitsForIt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	conf := logConf(fmt.Sprintf(`{"file":%q}`, file))
	args := Args{Command: CmdDel, ContainerID: "ctr1", IfName: "eth0", Path: []string{"/p"}}
	_, err := Invoke(context.Background(), leavesWork(nil), args, conf, nil)
	require.NoError(t, err)
	// A chain child's or a delegate's work joins its creator's Pending: the creator
	// waits, and the line is written when the child's share is done.
	var creator background.Pending
	fail := errors.New("link busy")
	_, err = Invoke(background.WithPending(context.Background(), &creator), leavesWork(fail), args, conf, nil)
	require.NoError(t, err, "the work's error is the creator's to collect")
	assert.ErrorIs(t, creator.Wait(), fail)

	lines := invlogtest.Lines(t, file)
	require.Len(t, lines, 2)
	own := lines[0]
	require.Len(t, own.Steps, 2)
	assert.Equal(t, steps.LinkDelete, own.Steps[0].Name)
	assert.Equal(t, steps.WaitPending, own.Steps[1].Name, "an invocation that owns its work waits for it")
	assert.GreaterOrEqual(t, own.DurationMs, 5.0)
	child := lines[1]
	require.Len(t, child.Steps, 1)
	assert.Equal(t, steps.LinkDelete, child.Steps[0].Name)
	assert.Equal(t, "link busy", child.Steps[0].Error)
	require.NotNil(t, child.Error, "the work's failure is the invocation's")
	assert.Contains(t, child.Error.Msg, "link busy")
	assert.GreaterOrEqual(t, child.DurationMs, 5.0)
}

func TestFailuresAreLoggedWithTheirFailingStep(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	fail := cnierror.New(cnierror.CodeTryAgainLater, "range exhausted")
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/x", IfName: "eth0", Path: []string{"/p"}, NetnsOverride: true}
	_, err := Invoke(context.Background(), stepper(nil, fail), args, logConf(fmt.Sprintf(`{"file":%q}`, file)), nil)
	require.Error(t, err)
	// Refusals before the config is read are logged too, when the environment logs.
	args.LogFile, args.IfName = file, "bad/name"
	_, err = Invoke(context.Background(), stepper(nil, nil), args, logConf(""), nil)
	require.Error(t, err)

	lines := invlogtest.Lines(t, file)
	require.Len(t, lines, 2)
	assert.Equal(t, &invlog.Error{Code: 11, Msg: "range exhausted"}, lines[0].Error)
	require.NotNil(t, lines[0].FailedStep())
	assert.Equal(t, steps.IPAM, lines[0].FailedStep().Name)
	assert.Equal(t, "range exhausted", lines[0].FailedStep().Error)
	assert.Equal(t, uint(4), lines[1].Error.Code)
	assert.Equal(t, "bad/name", lines[1].IfName)
}

func TestTraceContextReachesTheLogAndInProcessDelegates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	var out bytes.Buffer
	e := env("ADD", "CNI_NETNS_OVERRIDE=1", "TRACEPARENT="+traceparent, "TRACESTATE=vendor=1", "BAGGAGE=user=alice")
	code := Run(stepper(delegate(), nil), e, bytes.NewReader(logConf(fmt.Sprintf(`{"file":%q}`, file))), &out, quiet(t))
	require.Zero(t, code, out.String())

	lines := invlogtest.Lines(t, file)
	require.Len(t, lines, 2)
	del, main := lines[0], lines[1] // the delegate answers first
	assert.Equal(t, "delegate", del.Plugin)
	assert.Equal(t, "stepper", main.Plugin)
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", main.TraceID)
	assert.Equal(t, "00f067aa0ba902b7", main.ParentSpanID, "the runtime's span is the plugin's parent")
	assert.Len(t, main.SpanID, 16)
	assert.NotEqual(t, main.ParentSpanID, main.SpanID)
	assert.Equal(t, main.TraceID, del.TraceID)
	assert.Equal(t, main.Steps[0].SpanID, del.ParentSpanID, "an in-process delegate is a child of the step that ran it")
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "alice", "baggage is passed on, never logged")
}

func TestBadLogObjectFailsAddButNotDel(t *testing.T) {
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/x", IfName: "eth0", Path: []string{"/p"}, NetnsOverride: true}
	_, err := Invoke(context.Background(), stepper(nil, nil), args, logConf(`{"file":"/tmp/x","level":"loud"}`), nil)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Contains(t, err.Error(), "log.level")

	args.Command = CmdDel
	var stderr bytes.Buffer
	_, err = Invoke(context.Background(), stepper(nil, nil), args, logConf(`{"file":"/tmp/x","level":"loud"}`), &stderr)
	assert.NoError(t, err, "DEL needs only the attachment")
	assert.Contains(t, stderr.String(), "log.level")

	args.Command, args.LogFile, args.LogLevel = CmdAdd, "/tmp/x", "loud"
	_, err = Invoke(context.Background(), stepper(nil, nil), args, logConf(""), nil)
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.Code(err), "a bad CNI_LOG_LEVEL is a bad environment variable")
}

func TestAFailureToLogNeverFailsThePlugin(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	var stderr bytes.Buffer
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/x", IfName: "eth0", Path: []string{"/p"}, NetnsOverride: true}
	res, err := Invoke(context.Background(), stepper(nil, nil), args,
		logConf(fmt.Sprintf(`{"file":%q}`, filepath.Join(blocker, "cni.log"))), &stderr)
	require.NoError(t, err)
	assert.NotNil(t, res)
	assert.Contains(t, stderr.String(), "invocation log")
}

func TestLogOffCostsNoAllocation(t *testing.T) {
	ctx := context.Background()
	args := ArgsFromEnv(env("ADD"))
	conf := NetConf{Name: "n", CNIVersion: "1.0.0"}
	p := &Plugin{Name: "p"}
	wait := func() error { return nil }
	allocs := testing.AllocsPerRun(1000, func() {
		in := invocation{ctx: ctx, p: p, args: args, stderr: io.Discard, conf: conf}
		lg, err := openLog(&in)
		if err != nil {
			panic(err)
		}
		lg = lg.configure(&in)
		err = lg.waitWork(&in, in.ctx, true, wait, nil, err)
		lg.finish(&in, nil, err)
	})
	assert.Zero(t, allocs)
}

func TestLogLinesAreJSONObjects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/x", IfName: "eth0", Path: []string{"/p"}, NetnsOverride: true,
		CNIArgs: "K8S_POD_NAME=a;SECRET_TOKEN=abc"}
	_, err := Invoke(context.Background(), stepper(nil, errors.New("plain")), args,
		[]byte(fmt.Sprintf(`{"cniVersion":"1.0.0","name":"n","log":{"file":%q,"level":"debug"},"runtimeConfig":{"x":{"password":"p"}}}`, file)), nil)
	require.Error(t, err)
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	assert.Equal(t, map[string]any{"x": map[string]any{"password": invlog.Redacted}}, m["runtimeConfig"])
	assert.NotContains(t, string(raw), "abc")
	assert.True(t, strings.HasSuffix(string(raw), "}\n"))
}

// BenchmarkInvokeLog measures what the invocation log adds to an in-process invocation
// of a plugin doing one step: off (nothing), and on at info and debug.
func BenchmarkInvokeLog(b *testing.B) {
	file := filepath.Join(b.TempDir(), "cni.log")
	args := Args{Command: CmdAdd, ContainerID: "ctr1", Netns: "/x", IfName: "eth0", Path: []string{"/p"}, NetnsOverride: true,
		CNIArgs: "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web-0", Env: []string{"TRACEPARENT=" + traceparent}}
	for _, c := range []struct{ name, log string }{
		{"off", ""},
		{"info", fmt.Sprintf(`{"file":%q,"maxSizeMB":1}`, file)},
		{"debug", fmt.Sprintf(`{"file":%q,"level":"debug","maxSizeMB":1}`, file)},
	} {
		b.Run(c.name, func(b *testing.B) {
			conf := logConf(c.log)
			p := stepper(nil, nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Invoke(context.Background(), p, args, conf, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
