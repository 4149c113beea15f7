package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	require.Len(t, lines, 4, out)
	assert.True(t, strings.HasPrefix(lines[0], "TIME "), "a header")
	assert.Contains(t, lines[1], " ADD    bridge      k8s             prod/web-1          31.5  error 11")
	assert.Equal(t, "    in ipam after 27.0 ms: no IP addresses available in range set: 10.88.0.1-10.88.0.6", lines[2],
		"the failing step, its duration and the message under the row")
	assert.Contains(t, lines[3], " DEL ")

	_, out, _ = command(t, env, "log", "--errors", "--steps")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Equal(t, "    link create           4.00 ms  at +0.50 ms", lines[3])
	assert.Equal(t, "    ipam                 27.00 ms  at +4.50 ms", lines[4])
	assert.Equal(t, "        failed: no IP addresses available in range set: 10.88.0.1-10.88.0.6", lines[5])

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

func TestLogSaysWhereTheFileItReadsCameFrom(t *testing.T) {
	noConfs := []string{"NETCONFPATH=" + t.TempDir()}
	if _, err := os.Lstat(cli.DefaultLogFile); os.IsNotExist(err) {
		code, _, stderr := command(t, noConfs, "log")
		assert.Zero(t, code, stderr)
		assert.Contains(t, stderr, cli.DefaultLogFile+" (the default: no --file, CNI_LOG_FILE or log object in ")
	}
	missing := filepath.Join(t.TempDir(), "none")
	_, _, stderr := command(t, append(noConfs, invlog.EnvFile+"="+missing), "stats")
	assert.Contains(t, stderr, missing+" (CNI_LOG_FILE): no log there yet")
	code, _, _ := command(t, nil, "stats", "--file", "/x", "extra")
	assert.Equal(t, cli.ExitUsage, code)
	code, out, stderr := command(t, nil, "log", "--file", missing, "--json")
	assert.Zero(t, code, "a log not written yet has no lines")
	assert.Empty(t, out)
	assert.Contains(t, stderr, missing+" (--file): no log there yet", "a mistyped path is not taken for a quiet node")
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

// TestLogFindsTheFileTheConfDirsLogObjectNames: with no --file and no CNI_LOG_FILE in the
// operator's shell (the runtime's environment is not the shell's), cni log and stats
// read the file the log objects of the conf dir's configs name, a chain plugin's
// children included; configs naming two files are a usage error naming both.
func TestLogFindsTheFileTheConfDirsLogObjectNames(t *testing.T) {
	file := sampleLog(t)
	confDir := t.TempDir()
	conflist := `{"cniVersion":"1.0.0","name":"k8s","plugins":[{"type":"chain","plugins":[` +
		`{"type":"bridge","log":{"file":%q}},{"type":"portmap","log":{"file":%q,"level":"debug"}}]}]}`
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "10-k8s.conflist"), fmt.Appendf(nil, conflist, file, file), 0o644))
	_, want, _ := command(t, nil, "log", "--file", file, "--json")
	require.NotEmpty(t, want)

	code, out, stderr := command(t, []string{"NETCONFPATH=" + confDir}, "log", "--json")
	assert.Zero(t, code, stderr)
	assert.Equal(t, want, out)
	code, out, stderr = command(t, nil, "stats", "--conf-dir", confDir)
	assert.Zero(t, code, stderr)
	assert.Contains(t, out, "bridge       ADD           2       1")

	other := filepath.Join(t.TempDir(), "other.log")
	require.NoError(t, os.WriteFile(filepath.Join(confDir, "20-lo.conflist"),
		fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback","log":{"file":%q}}]}`, other), 0o644))
	code, _, stderr = command(t, nil, "log", "--conf-dir", confDir)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "log to 2 files, give one with --file: "+file+" ("+filepath.Join(confDir, "10-k8s.conflist")+"), "+other)
}

// TestLogTableFitsInAHundredColumns: the widest entries a node writes (the longest
// plugin and command names, Calico's network name, a 64-digit container id, a pod of the
// longest namespace and name Kubernetes allows, a dual-stack result, a long error in a
// failed step) print no line over 100 columns; what does not fit a row goes on indented
// lines under it, whole.
func TestLogTableFitsInAHundredColumns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	c := invlog.Config{File: file}
	longMsg := "failed to allocate for range 0: no IP addresses available in range set: 10.244.128.10-10.244.128.11; " +
		"/var/lib/cni/networks/k8s-pod-network/a-path-that-is-one-word-longer-than-any-line-of-the-table-can-hold-so-it-is-cut-" +
		strings.Repeat("x", 60)
	pod := map[string]string{"K8S_POD_NAME": strings.Repeat("p", 253), "K8S_POD_NAMESPACE": strings.Repeat("n", 63)}
	at := time.Date(2026, 12, 31, 23, 59, 59, 999e6, time.UTC)
	for _, e := range []invlog.Entry{
		{Command: "STATUS", Plugin: "host-device", Network: "k8s-pod-network", ContainerID: strings.Repeat("f", 64), DurationMs: 30000.1},
		{Command: "ADD", Plugin: "dhcp-daemon", Network: strings.Repeat("n", 64), ContainerID: strings.Repeat("a", 64), DurationMs: 12.3, CNIArgs: pod,
			Result: &invlog.Result{IPs: []invlog.IP{{Address: "10.244.128.123/24"}, {Address: "fd00:10:244:128:ffff:ffff:ffff:fffe/64"}}}},
		{Command: "CHECK", Plugin: "bandwidth", Network: "k8s-pod-network", ContainerID: strings.Repeat("b", 64), DurationMs: 99999.9, CNIArgs: pod,
			Steps: []invlog.Step{{Name: "wait background", DurationMs: 99999.9, StartMs: 99999.9, Error: longMsg}},
			Error: &invlog.Error{Code: 999, Msg: longMsg}},
	} {
		e.Time, e.Version = at, "test"
		line, err := e.Line()
		require.NoError(t, err)
		require.NoError(t, c.Append(line))
	}
	code, out, stderr := command(t, nil, "log", "--file", file, "--steps")
	require.Zero(t, code, stderr)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 100, "%q", l)
	}
	joined := strings.Join(strings.Fields(out), "")
	assert.Contains(t, joined, strings.ReplaceAll("in wait background after 99999.9 ms: "+longMsg, " ", ""), "the message, whole")
	assert.Contains(t, joined, "fd00:10:244:128:ffff:ffff:ffff:fffe/64", "every address")
	assert.Contains(t, out, " n…/"+strings.Repeat("p", 13)+"… ", "of a pod too long for its column, the name's start is kept")
	assert.Contains(t, out, " ok 10.244.128.123/24\n", "an IPv4 result fits its row")
	assert.Equal(t, 3+1, strings.Count(out, "\n")-strings.Count(out, "\n    "), "one row per entry (and the header)")
}
