package invlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/result"
)

// writerEnv makes the test binary a writer process of TestManyProcessesRotatingLoseNoLine.
const writerEnv = "INVLOG_TEST_WRITER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(writerEnv); spec != "" {
		os.Exit(writeLines(spec))
	}
	os.Exit(m.Run())
}

// writeLines appends "count" lines tagged with "writer" to "file", as a plugin process
// would: spec is FILE,WRITER,COUNT,MAXBYTES.
func writeLines(spec string) int {
	var file string
	var writer, count int
	var maxBytes float64
	if _, err := fmt.Sscanf(spec, "%s %d %d %g", &file, &writer, &count, &maxBytes); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := Config{File: file, MaxSizeMB: maxBytes / (1 << 20), MaxFiles: maxRotated}
	for i := range count {
		if err := c.Append(testLine(writer, i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// testLine is a log line of realistic size naming its writer and sequence number.
func testLine(writer, seq int) []byte {
	e := Entry{
		Time: time.Now().UTC(), Command: "ADD", Plugin: "bridge", Network: "net" + strconv.Itoa(writer),
		ContainerID: fmt.Sprintf("w%d-%d", writer, seq), Netns: "/var/run/netns/cni-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
		IfName: "eth0", CNIVersion: "1.0.0", DurationMs: 12.5, Version: "test",
		Steps:  []Step{{Name: steps.IPAM, DurationMs: 1}, {Name: steps.LinkCreate, DurationMs: 3}, {Name: steps.Addresses, DurationMs: 1}},
		Result: &Result{IPs: []IP{{Address: "10.1.2.3/24", Gateway: "10.1.2.1"}}, Interfaces: []Interface{{Name: "eth0", Mac: "0a:58:0a:01:02:03"}}},
	}
	line, err := e.Line()
	if err != nil {
		panic(err)
	}
	return line
}

func TestManyProcessesRotatingLoseNoLine(t *testing.T) {
	const writers, perWriter, rotateAt = 8, 1500, 128 << 10
	file := filepath.Join(t.TempDir(), "cni.log")
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d", writerEnv, file, w, perWriter, rotateAt))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[w] = fmt.Errorf("writer %d: %v: %s", w, err, out)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	rotated, err := Rotated(file)
	require.NoError(t, err)
	assert.Greater(t, len(rotated), 5, "the test must rotate many times")
	for _, name := range append(rotated, file) {
		fi, err := os.Stat(name)
		require.NoError(t, err)
		assert.LessOrEqual(t, fi.Size(), int64(rotateAt+4096), "%s: rotated at the size (one line of slack per writer)", name)
	}
	seen := readBack(t, file)
	for w := range writers {
		for i := range perWriter {
			assert.Equal(t, 1, seen[fmt.Sprintf("w%d-%d", w, i)], "line %d of writer %d", i, w)
		}
	}
}

// readBack reads every line of the log and its rotated files as an entry and counts
// them by container id; it fails on any line that is no entry.
func readBack(t *testing.T, file string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	r := &Reader{Path: file}
	require.NoError(t, r.Read(context.Background(), func(e *Entry, line []byte) error {
		var generic map[string]any
		require.NoError(t, json.Unmarshal(line, &generic), "every line is one JSON object")
		seen[e.ContainerID]++
		return nil
	}))
	assert.Zero(t, r.Bad, "no torn or foreign line")
	return seen
}

func TestGoroutinesRotatingLoseNoLine(t *testing.T) {
	const writers, perWriter = 8, 500
	file := filepath.Join(t.TempDir(), "sub", "dir", "cni.log")
	c := Config{File: file, MaxSizeMB: 32.0 / 1024, MaxFiles: maxRotated}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				assert.NoError(t, c.Append(testLine(w, i)))
			}
		}()
	}
	wg.Wait()
	seen := readBack(t, file)
	assert.Len(t, seen, writers*perWriter)
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(fileMode), fi.Mode().Perm(), "the log names pods: owner only")
}

func TestRotationKeepsMaxFiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	c := Config{File: file, MaxSizeMB: 1.0 / 1024, MaxFiles: 3}
	for i := range 200 {
		require.NoError(t, c.Append(testLine(0, i)))
	}
	rotated, err := Rotated(file)
	require.NoError(t, err)
	assert.Equal(t, []string{file + ".3", file + ".2", file + ".1"}, rotated)
	seen := readBack(t, file)
	assert.Equal(t, 1, seen["w0-199"], "the newest line is kept")
	assert.Zero(t, seen["w0-0"], "the oldest aged out")
}

func TestAppendRefusesASymlinkedLog(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	require.NoError(t, os.WriteFile(target, nil, 0o600))
	file := filepath.Join(dir, "cni.log")
	require.NoError(t, os.Symlink(target, file))
	c := Config{File: file}
	assert.Error(t, c.Append(testLine(0, 0)), "a link planted at the log's path is not written through")
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Empty(t, b)
}

func TestReaderFollowsAcrossRotations(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	c := Config{File: file, MaxSizeMB: 2.0 / 1024, MaxFiles: 50}
	require.NoError(t, c.Append(testLine(0, 0)))
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		r := &Reader{Path: file, Follow: true, Poll: 5 * time.Millisecond}
		done <- r.Read(ctx, func(e *Entry, _ []byte) error {
			got <- e.ContainerID
			return nil
		})
	}()
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("w0-%d", i))
		if i > 0 {
			require.NoError(t, c.Append(testLine(0, i)))
		}
		if i%7 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var have []string
	timeout := time.After(10 * time.Second)
	for len(have) < len(want) {
		select {
		case id := <-got:
			have = append(have, id)
		case <-timeout:
			t.Fatalf("followed %d of %d lines: %v", len(have), len(want), have)
		}
	}
	cancel()
	require.NoError(t, <-done)
	assert.ElementsMatch(t, want, have, "every line once, across rotations")
	rotated, _ := Rotated(file)
	assert.NotEmpty(t, rotated)
}

// The moment between a writer renaming FILE to FILE.1 and creating the next FILE has no
// live file. A catch-up that lands in it reads the files rotated meanwhile, and the next
// one starts after them: before, it started over at the oldest rotated file, and a
// follower printed every line again (the flake that failed CI in stop 32).
func TestCatchUpWithoutALiveFileReadsOnlyWhatIsNew(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	write := func(name string, seqs ...int) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
		require.NoError(t, err)
		for _, i := range seqs {
			_, err = f.Write(testLine(0, i))
			require.NoError(t, err)
		}
		require.NoError(t, f.Close())
	}
	var read []string
	collect := func(e *Entry, _ []byte) error { read = append(read, e.ContainerID); return nil }
	r := &Reader{Path: file}

	write(file, 0, 1)
	live, done, _, err := r.catchUp(nil, collect)
	require.NoError(t, err)
	_, err = r.lines(live, nil, collect)
	require.NoError(t, err)
	require.NoError(t, live.Close()) // read to its end, as Read does before a catch-up
	assert.Equal(t, []string{"w0-0", "w0-1"}, read)

	// Two rotations since: FILE.2 is the file followed, FILE.1 one never seen live, and
	// the next FILE is not there yet.
	require.NoError(t, os.Rename(file, file+".1"))
	write(file, 2, 3)
	require.NoError(t, os.Rename(file+".1", file+".2"))
	require.NoError(t, os.Rename(file, file+".1"))
	read = nil
	live, liveInfo, done, err := r.catchUp(done, collect)
	require.NoError(t, err)
	assert.Nil(t, live)
	assert.Nil(t, liveInfo)
	assert.Equal(t, []string{"w0-2", "w0-3"}, read, "the file rotated unseen is read")

	write(file, 4)
	read = nil
	live, _, _, err = r.catchUp(done, collect)
	require.NoError(t, err)
	require.NotNil(t, live)
	t.Cleanup(func() { live.Close() })
	_, err = r.lines(live, nil, collect)
	require.NoError(t, err)
	assert.Equal(t, []string{"w0-4"}, read, "nothing read before is read again")
	assert.Zero(t, r.Bad)
}

// A writer renames under an exclusive lock on FILE.lock; a reader lists and opens the
// files under a shared one, so that no name it lists is renamed onto before it opens it.
func TestCatchUpWaitsForARotationInProgress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	c := Config{File: file, MaxSizeMB: 1.0 / 1024}
	for i := range 6 {
		require.NoError(t, c.Append(testLine(0, i)))
	}
	unlock, err := lock(lockName(file), unix.LOCK_EX)
	require.NoError(t, err)
	caught := make(chan error, 1)
	var read []string
	go func() {
		r := &Reader{Path: file}
		caught <- r.Read(context.Background(), func(e *Entry, _ []byte) error {
			read = append(read, e.ContainerID)
			return nil
		})
	}()
	select {
	case err := <-caught:
		t.Fatalf("read while a rotation held the lock: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	require.NoError(t, <-caught)
	assert.Len(t, read, 6)
}

func TestReaderCountsBadLines(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	good := testLine(1, 1)
	require.NoError(t, os.WriteFile(file, append(append([]byte("not json\n{\"x\":1}\n"), good...), `{"command":"ADD","plug`...), 0o600))
	r := &Reader{Path: file}
	var n int
	require.NoError(t, r.Read(context.Background(), func(*Entry, []byte) error { n++; return nil }))
	assert.Equal(t, 1, n)
	assert.Equal(t, 2, r.Bad, "a foreign line, and an object that is no entry; the unfinished last line is not read")
	assert.NoFileExists(t, lockName(file), "a reader leaves the log's directory as it found it")
	missing := &Reader{Path: filepath.Join(t.TempDir(), "none.log")}
	assert.NoError(t, missing.Read(context.Background(), func(*Entry, []byte) error { return nil }))
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"file":"/var/log/cni.log","level":"debug","maxSizeMB":0.5,"maxFiles":2}`))
	require.NoError(t, err)
	assert.Equal(t, &Config{File: "/var/log/cni.log", Level: LevelDebug, MaxSizeMB: 0.5, MaxFiles: 2}, c)
	assert.Equal(t, int64(512<<10), c.MaxBytes())
	assert.Equal(t, 2, c.Rotated())
	c, err = ParseConfig(nil)
	assert.NoError(t, err)
	assert.Nil(t, c)
	c, err = ParseConfig(json.RawMessage(`{"FILE":"/var/log/cni.log","MaxSizeMB":1}`))
	require.NoError(t, err, "keys match as encoding/json matches them, case-insensitively")
	assert.Equal(t, &Config{File: "/var/log/cni.log", MaxSizeMB: 1}, c)

	for raw, field := range map[string]string{
		`"yes"`:             "log:",
		`{"level":"trace"}`: "log.level:",
		`{"maxSizeMB":-1}`:  "log.maxSizeMB:",
		`{"maxFiles":1000}`: "log.maxFiles:",
		`{"file":"a\nb"}`:   "log.file:",
		`{"maxFiles":"2"}`:  "log:",
		// A misspelled key would leave the log silently off.
		`{"path":"/var/log/cni.log"}`:             "log.path: unknown key",
		`{"file":"/var/log/cni.log","maxSize":1}`: "log.maxSize: unknown key",
	} {
		_, err := ParseConfig(json.RawMessage(raw))
		require.Error(t, err, raw)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), raw)
		assert.Contains(t, err.Error(), field, raw)
	}
	_, err = FromEnv("/var/log/cni.log", "loud")
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.Code(err))
	assert.Contains(t, err.Error(), EnvLevel)
}

func TestConfigWinsOverEnvironmentKeyByKey(t *testing.T) {
	env := &Config{File: "/var/log/node.log", Level: LevelDebug}
	assert.Equal(t, env, Resolve(nil, env))
	assert.Equal(t, &Config{File: "/var/log/mine.log", Level: LevelDebug, MaxFiles: 2},
		Resolve(&Config{File: "/var/log/mine.log", MaxFiles: 2}, env))
	assert.Equal(t, &Config{File: "/var/log/node.log", Level: LevelInfo},
		Resolve(&Config{Level: LevelInfo}, env), "a log object without a file logs to the node's")
	assert.Nil(t, Resolve(&Config{Level: LevelInfo}, nil), "no file anywhere: no log")
	assert.Nil(t, Resolve(nil, nil))
}

func TestEntryHasTheIssuesKeys(t *testing.T) {
	start := time.Now()
	span := tracectx.New()
	rec := steps.New(start, span)
	rec.Begin(steps.IPAM).Done(nil)
	one := 1
	inv := Invocation{
		Plugin: "bridge", Command: "ADD", Network: "mynet", ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0",
		CNIVersion: "1.1.0", CNIArgs: "K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default", Steps: rec, Parent: tracectx.NewSpanID(),
		RuntimeConfig: json.RawMessage(`{"portMappings":[{"hostPort":80}]}`),
		Result: &result.Result{Interfaces: []result.Interface{{Name: "eth0", Mac: "aa:bb:cc:dd:ee:ff"}},
			IPs:    []result.IPConfig{{Interface: &one, Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1")}},
			Routes: []result.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0")}}},
	}
	c := Config{File: "x"}
	e := c.Entry(inv, start.Add(1500*time.Microsecond))
	line, err := e.Line()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(line, &got))
	for _, k := range []string{"time", "command", "plugin", "network", "containerID", "netns", "ifName", "cniVersion",
		"durationMs", "steps", "result", "traceID", "spanID", "version"} {
		assert.Contains(t, got, k)
	}
	assert.NotContains(t, got, "error")
	assert.Equal(t, 1.5, got["durationMs"])
	assert.Equal(t, span.TraceID.String(), got["traceID"])
	assert.Equal(t, map[string]any{"K8S_POD_NAME": "web-0", "K8S_POD_NAMESPACE": "default"}, got["cniArgs"])
	assert.Equal(t, []any{"portMappings"}, got["runtimeConfigKeys"])
	assert.NotContains(t, got, "runtimeConfig", "values only at debug")
	assert.NotContains(t, got["result"], "routes", "routes only at debug")
	step := got["steps"].([]any)[0].(map[string]any)
	assert.Equal(t, "ipam", step["name"])
	assert.Len(t, step["spanID"], 16)

	inv.Result, inv.Err = nil, cnierror.New(cnierror.CodeTryAgainLater, "busy").WithDetails("retry")
	debug := Config{File: "x", Level: LevelDebug}
	e = debug.Entry(inv, time.Now())
	assert.Equal(t, &Error{Code: 11, Msg: "busy", Details: "retry"}, e.Error)
	assert.Nil(t, e.Result)
	assert.JSONEq(t, `{"portMappings":[{"hostPort":80}]}`, string(e.RuntimeConfig))
}

func TestRedaction(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	got := RedactCNIArgs("K8S_POD_NAME=web-7d9f8c6b5-x2x4z;K8S_POD_UID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0;" +
		"K8S_POD_INFRA_CONTAINER_ID=4bf92f3577b34da6a3ce929d0e0e47364bf92f3577b34da6a3ce929d0e0e4736;" +
		"AUTH=hunter2;MY_TOKEN=short;X=" + jwt + ";KEY2=AKIAIOSFODNN7EXAMPLEwJalrXUtnFEMI;PLAIN=hello;NOVALUE;" +
		"ZONE=internal-zone-number-two;UUID=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	assert.Equal(t, map[string]string{
		"K8S_POD_NAME":               "web-7d9f8c6b5-x2x4z",
		"K8S_POD_UID":                "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
		"K8S_POD_INFRA_CONTAINER_ID": "4bf92f3577b34da6a3ce929d0e0e47364bf92f3577b34da6a3ce929d0e0e4736",
		"AUTH":                       Redacted, // by its key
		"MY_TOKEN":                   Redacted,
		"X":                          Redacted, // a JWT
		"KEY2":                       Redacted, // an access key
		"PLAIN":                      "hello",
		"NOVALUE":                    "",
		"ZONE":                       "internal-zone-number-two",
		"UUID":                       "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
	}, got)

	red := RedactJSON(json.RawMessage(`{"bandwidth":{"ingressRate":1000},"login":{"password":"p","user":"u"},
		"io.kubernetes.cri.pod-annotations":{"note":"` + jwt + `","ok":"plain words"},"n":12345678901234567890}`))
	assert.JSONEq(t, `{"bandwidth":{"ingressRate":1000},"login":{"password":"[redacted]","user":"u"},
		"io.kubernetes.cri.pod-annotations":{"note":"[redacted]","ok":"plain words"},"n":12345678901234567890}`, string(red))
	assert.Nil(t, RedactJSON(json.RawMessage(`{bad`)))
	assert.Equal(t, []string{"a", "b"}, Keys(json.RawMessage(`{"b":1,"a":{"secret":2}}`)))
	assert.Nil(t, Keys(json.RawMessage(`[1]`)))
	assert.Equal(t, []string{"a", "b"}, Keys(json.RawMessage(`{"b":[1,{"c":[]}],"a":null,"b":2}`)), "each key once")
	assert.Nil(t, Keys(json.RawMessage(`{"a":1} {}`)))
	assert.Nil(t, Keys(json.RawMessage(`{"a":}`)))
	assert.Empty(t, Keys(json.RawMessage(`{}`)))
}

func TestRedactionByKeyName(t *testing.T) {
	redacted := []string{
		"PASS", "DB_PASS", "PWD", "CREDS", "KEY", "SSH_KEY", "API_KEY", "aws-key", "TOKEN", "SECRET", "AUTH",
		"PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "PRIVATE", "PRIVATE_KEY", "pass", "Pass", "db_pass",
		"dbPass", "DBPass", "apiKey", "secretKey", "KEY2", "key.pem", "X-Auth-Token", "GITHUB_PAT_TOKEN", "ROOT_PW",
		"clientSecret", "MY_CRED", "passphrase", "SESSION_ID", "KEYS",
	}
	kept := []string{
		"K8S_POD_NAME", "K8S_POD_NAMESPACE", "K8S_POD_UID", "K8S_POD_INFRA_CONTAINER_ID", "IgnoreUnknown",
		"IP", "MAC", "GATEWAY", "PLAIN", "ZONE", "MONKEY", "BYPASS", "KEYSPACE", "TURKEY_COUNT", "COMPASS", "HOSTNAME",
		"PODNAME", "SPWDX",
	}
	for _, k := range redacted {
		got := RedactCNIArgs(k + "=hunter2")
		assert.Equal(t, Redacted, got[k], "%s names a credential", k)
	}
	for _, k := range kept {
		got := RedactCNIArgs(k + "=plain-value")
		assert.Equal(t, "plain-value", got[k], "%s is kept", k)
	}
	red := RedactJSON(json.RawMessage(`{"dbPass":"p","sshKey":"k","user":"u","portMappings":[{"hostPort":80}]}`))
	assert.JSONEq(t, `{"dbPass":"[redacted]","sshKey":"[redacted]","user":"u","portMappings":[{"hostPort":80}]}`, string(red))
}

func TestKeyWordsSplitAtSeparatorsAndCase(t *testing.T) {
	for k, want := range map[string][]string{
		"DB_PASS": {"db", "pass"}, "dbPass": {"db", "pass"}, "DBPass": {"db", "pass"}, "ssh-key.pem": {"ssh", "key", "pem"},
		"KEY2": {"key"}, "K8S_POD_NAME": {"k", "s", "pod", "name"}, "": nil, "__": nil, "apiKEY": {"api", "key"},
	} {
		assert.Equal(t, want, keyWords(k), k)
	}
}

func FuzzRedactCNIArgs(f *testing.F) {
	f.Add("K8S_POD_NAME=a;TOKEN=b;;=c;d")
	f.Fuzz(func(t *testing.T, raw string) {
		for k, v := range RedactCNIArgs(raw) {
			if secretKey(k) && !knownArg(k) && v != Redacted && v != "" {
				t.Fatalf("%q=%q kept", k, v)
			}
		}
	})
}

func FuzzReader(f *testing.F) {
	f.Add(string(testLine(1, 2)) + "garbage\n{\"command\":\"DEL\"}\n")
	f.Fuzz(func(t *testing.T, content string) {
		file := filepath.Join(t.TempDir(), "cni.log")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &Reader{Path: file}
		if err := r.Read(context.Background(), func(e *Entry, _ []byte) error {
			if e.Command == "" {
				t.Fatal("an entry without a command")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"file":"/var/log/cni.log","level":"debug","maxSizeMB":0.5,"maxFiles":2}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"level":"loud"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := ParseConfig(raw)
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidConfig {
				t.Fatalf("%q: %v is not code 7", raw, err)
			}
			return
		}
		if c != nil && (c.MaxBytes() < 1 || c.Rotated() < 1) {
			t.Fatalf("%q: rotation at %d bytes, %d files", raw, c.MaxBytes(), c.Rotated())
		}
	})
}

func FuzzRedactJSON(f *testing.F) {
	f.Add([]byte(`{"a":{"token":"x","b":["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc"]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out := RedactJSON(raw)
		if out != nil && !json.Valid(out) {
			t.Fatalf("%q redacted to invalid JSON %q", raw, out)
		}
	})
}

func FuzzKeys(f *testing.F) {
	f.Add([]byte(`{"b":[1,{"c":[]}],"a":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := Keys(raw)
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			if got != nil {
				t.Fatalf("%q: keys %q of no object", raw, got)
			}
			return
		}
		if len(got) != len(m) {
			t.Fatalf("%q: keys %q, want those of %v", raw, got, m)
		}
		for _, k := range got {
			if _, ok := m[k]; !ok {
				t.Fatalf("%q: key %q is not in %v", raw, k, m)
			}
		}
	})
}

func TestAFIFOAtTheLogsPathIsRefusedAtOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cni.log")
	require.NoError(t, syscall.Mkfifo(file, 0o600))
	c := Config{File: file}
	err := returnsAtOnce(t, file, os.O_RDONLY, func() error { return c.Append(testLine(0, 0)) })
	assert.Error(t, err, "a FIFO is no log file: the plugin, and its runtime, must not wait for a reader")
	err = returnsAtOnce(t, file, os.O_WRONLY, func() error {
		return (&Reader{Path: file}).Read(context.Background(), func(*Entry, []byte) error { return nil })
	})
	assert.Error(t, err, "cni log refuses a FIFO rather than wait for a writer")
}

// returnsAtOnce runs fn and returns its error, failing the test when fn is still
// blocked after 5 s on the FIFO at fifo; it then opens the FIFO's other end (flag) so
// that fn returns and the test ends.
func returnsAtOnce(t *testing.T, fifo string, flag int, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		if f, err := os.OpenFile(fifo, flag|syscall.O_NONBLOCK, 0); err == nil {
			defer f.Close()
		}
		t.Fatal("blocked on the FIFO")
		return nil
	}
}

func TestAnUnmakeableLogDirectoryIsTheErrorReported(t *testing.T) {
	dir := t.TempDir()
	// A dangling link where the log's directory belongs: opening the log says only
	// "no such file or directory"; making the directory says why it cannot be.
	require.NoError(t, os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "logs")))
	c := Config{File: filepath.Join(dir, "logs", "cni.log")}
	err := c.Append(testLine(0, 0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mkdir "+filepath.Join(dir, "logs"))
}
