package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/runtime/cli"
)

// command runs one cli command in-process.
func command(t *testing.T, env []string, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for _, c := range cli.Commands() {
		if c.Name == name {
			var out, errb bytes.Buffer
			code := c.Run(cli.Process{Env: env, Stdout: &out, Stderr: &errb}, args)
			return code, out.String(), errb.String()
		}
	}
	t.Fatalf("no command %q", name)
	return 0, "", ""
}

// sampleLog writes a log of three pods' invocations (one failed ADD, in rotated and
// live files) and returns its path.
func sampleLog(t *testing.T) string {
	file := filepath.Join(t.TempDir(), "cni.log")
	c := invlog.Config{File: file, MaxSizeMB: 1.0 / 1024, MaxFiles: 10}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	add := func(e invlog.Entry) {
		e.Time, e.Version, e.CNIVersion = at, "test", "1.0.0"
		at = at.Add(time.Second)
		if e.Steps == nil {
			e.Steps = []invlog.Step{}
		}
		line, err := e.Line()
		require.NoError(t, err)
		require.NoError(t, c.Append(line))
	}
	pod := func(name string) map[string]string {
		return map[string]string{"K8S_POD_NAME": name, "K8S_POD_NAMESPACE": "prod"}
	}
	ok := &invlog.Result{IPs: []invlog.IP{{Address: "10.88.0.5/16"}}}
	add(invlog.Entry{Command: "ADD", Plugin: "bridge", Network: "k8s", ContainerID: "aaaa1111", IfName: "eth0", DurationMs: 20, CNIArgs: pod("web-0"), Result: ok})
	add(invlog.Entry{Command: "ADD", Plugin: "bridge", Network: "k8s", ContainerID: "bbbb2222", IfName: "eth0", DurationMs: 31.5, CNIArgs: pod("web-1"),
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Steps: []invlog.Step{{Name: "link create", DurationMs: 4, StartMs: 0.5, SpanID: "1111111111111111"},
			{Name: "ipam", DurationMs: 27, StartMs: 4.5, SpanID: "2222222222222222", Error: "no IP addresses available in range set: 10.88.0.1-10.88.0.6"}},
		Error: &invlog.Error{Code: 11, Msg: "no IP addresses available in range set: 10.88.0.1-10.88.0.6"}})
	add(invlog.Entry{Command: "DEL", Plugin: "bridge", Network: "k8s", ContainerID: "bbbb2222", IfName: "eth0", DurationMs: 40, CNIArgs: pod("web-1")})
	add(invlog.Entry{Command: "ADD", Plugin: "host-local", Network: "k8s", ContainerID: "cccc3333", IfName: "eth0", DurationMs: 1, CNIArgs: pod("db-0"), Result: ok})
	rotated, err := invlog.Rotated(file)
	require.NoError(t, err)
	require.NotEmpty(t, rotated, "the sample spans rotated files")
	return file
}

func TestLogFiltersByPodAndErrors(t *testing.T) {
	file := sampleLog(t)
	env := []string{invlog.EnvFile + "=" + file}

	code, out, stderr := command(t, env, "log", "--pod", "web-1")
	require.Zero(t, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.True(t, strings.HasPrefix(lines[0], "TIME "), "a header")
	assert.Contains(t, lines[1], "ADD     bridge      k8s              bbbb2222     prod/web-1                   31.5  error 11: no IP addresses available")
	assert.Contains(t, lines[1], "(in ipam, 27.0 ms)", "the failing step and its duration")
	assert.Contains(t, lines[2], "DEL ")

	_, out, _ = command(t, env, "log", "--errors", "--steps")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Contains(t, lines[2], "    link create           4.00 ms  at +0.50 ms")
	assert.Contains(t, lines[3], "    ipam                 27.00 ms  at +4.50 ms  failed: no IP addresses")

	for args, want := range map[string]int{
		"--container aaaa": 1, "--plugin host-local": 1, "--command del": 1, "--network k8s": 4, "--network other": 0,
		"--namespace prod": 4, "--trace 4bf92f3577b34da6a3ce929d0e0e4736": 1,
	} {
		_, out, _ := command(t, env, "log", append(strings.Fields(args), "--json")...)
		assert.Equal(t, want, strings.Count(out, "\n"), args)
	}
}

func TestLogJSONIsTheLinesAsWritten(t *testing.T) {
	file := sampleLog(t)
	code, out, stderr := command(t, nil, "log", "--file", file, "--json")
	require.Zero(t, code, stderr)
	var raw []byte
	for _, name := range append(mustRotated(t, file), file) {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		raw = append(raw, b...)
	}
	assert.Equal(t, string(raw), out, "oldest first, byte for byte")
}

func mustRotated(t *testing.T, file string) []string {
	r, err := invlog.Rotated(file)
	require.NoError(t, err)
	return r
}

func TestLogOTLPWritesOneRequestPerTracedLine(t *testing.T) {
	file := sampleLog(t)
	code, out, stderr := command(t, nil, "log", "--file", file, "--otlp")
	require.Zero(t, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, "only the traced line has spans")
	var req map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &req))
	assert.Contains(t, lines[0], `"name":"bridge ADD"`)
	assert.Contains(t, lines[0], `"name":"ipam"`)
	assert.Equal(t, 1, strings.Count(stderr, "without a trace context"), "the skipped lines are said once: %s", stderr)
	assert.Contains(t, stderr, "TRACEPARENT")
}

func TestLogNeedsAFile(t *testing.T) {
	code, _, stderr := command(t, nil, "log")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "CNI_LOG_FILE")
	code, _, _ = command(t, nil, "stats", "--file", "/x", "extra")
	assert.Equal(t, cli.ExitUsage, code)
	missing := filepath.Join(t.TempDir(), "none")
	code, out, stderr := command(t, nil, "log", "--file", missing, "--json")
	assert.Zero(t, code, "a log not written yet has no lines")
	assert.Empty(t, out)
	assert.Contains(t, stderr, missing+": no log there yet", "a mistyped path is not taken for a quiet node")
	code, _, stderr = command(t, nil, "stats", "--file", missing)
	assert.Zero(t, code)
	assert.Contains(t, stderr, "no log there yet")
	_, _, stderr = command(t, nil, "log", "--file", sampleLog(t))
	assert.NotContains(t, stderr, "no log there yet")
}

func TestStatsTableAndPrometheus(t *testing.T) {
	file := sampleLog(t)
	code, out, stderr := command(t, nil, "stats", "--file", file)
	require.Zero(t, code, stderr)
	assert.Contains(t, out, "bridge       ADD           2       1")
	assert.Contains(t, out, "errors by code:\n  bridge       ADD     code 11   1\n")

	code, out, stderr = command(t, nil, "stats", "--file", file, "--prometheus", "--network", "k8s")
	require.Zero(t, code, stderr)
	assert.Contains(t, out, `cni_invocations{plugin="bridge",command="ADD"} 2`+"\n")
	assert.Contains(t, out, `cni_invocation_errors{plugin="bridge",command="ADD",code="11"} 1`+"\n")
	assert.Contains(t, out, `cni_invocation_duration_seconds{plugin="bridge",command="ADD",quantile="0.99"} 0.0315`+"\n")
}

func TestLogFollowPrintsNewLines(t *testing.T) {
	file := sampleLog(t)
	out := make(lines, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		for _, c := range cli.Commands() {
			if c.Name == "log" {
				p := cli.Process{Stdout: out, Stderr: out, Context: ctx}
				done <- c.Run(p, []string{"--file", file, "-f", "--json", "--pod", "late"})
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	c := invlog.Config{File: file, MaxSizeMB: 1.0 / 1024, MaxFiles: 10}
	e := invlog.Entry{Time: time.Now(), Command: "ADD", Plugin: "bridge", ContainerID: "late1", Steps: []invlog.Step{},
		CNIArgs: map[string]string{"K8S_POD_NAME": "late"}}
	line, err := e.Line()
	require.NoError(t, err)
	require.NoError(t, c.Append(line))
	select {
	case got := <-out:
		assert.Contains(t, got, `"containerID":"late1"`)
	case <-time.After(5 * time.Second):
		t.Fatal("the line written was not followed")
	}
	cancel()
	assert.Zero(t, <-done)
}

// lines is a writer handing each write on, for a command that runs on.
type lines chan string

func (l lines) Write(p []byte) (int, error) {
	l <- string(p)
	return len(p), nil
}

// A log file another user made (in a shared directory such as /tmp) is not read as the
// node's log, nor followed; a rotated file of theirs beside ours is skipped and named.
func TestLogRefusesAFileAnotherUserMade(t *testing.T) {
	file := sampleLog(t)
	rotated, err := invlog.Rotated(file)
	require.NoError(t, err)
	require.NoError(t, os.Chown(rotated[0], 65534, 65534))

	code, out, stderr := command(t, nil, "log", "--file", file, "--json")

	assert.Zero(t, code)
	assert.Contains(t, stderr, "cni: skipped open "+rotated[0]+": not this user's own: owned by uid 65534")
	assert.NotEmpty(t, out, "our own files are read")

	require.NoError(t, os.Chown(file, 65534, 65534))
	for _, args := range [][]string{{"--file", file}, {"--file", file, "-f"}} {
		code, out, stderr = command(t, nil, "log", args...)
		assert.NotZero(t, code, "%v", args)
		assert.NotContains(t, out, "bridge", "no line of theirs: %v", args)
		assert.Contains(t, stderr, file+": not this user's own: owned by uid 65534", "%v", args)
	}
}
