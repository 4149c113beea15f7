package invlog

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/result"
)

// viaEncodingJSON is what Line must equal.
func viaEncodingJSON(t testing.TB, e *Entry) string {
	b, err := json.Marshal(e)
	require.NoError(t, err)
	return string(b) + "\n"
}

func TestLineIsWhatEncodingJSONWrites(t *testing.T) {
	one, zero := 1, 0
	for name, e := range map[string]Entry{
		"empty":   {},
		"minimal": {Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Command: "ADD", Steps: []Step{}},
		"full": {
			Time: time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.FixedZone("x", 3600)), Command: "ADD", Plugin: "bridge",
			Network: "n<&>", ContainerID: "c\"1\\", Netns: "/run/netns/\u2028x", IfName: "eth\x00\x1f\t\n\r\b\f",
			CNIVersion: "1.1.0", DurationMs: 12.345, Version: "v1\xff\xfe",
			Steps: []Step{{Name: "ipam", DurationMs: 0.0000001, StartMs: 1e21, SpanID: "ab", Error: "é日本"}, {Name: "x", DurationMs: 1234567}},
			Result: &Result{Interfaces: []Interface{{Name: "eth0", Mac: "m", Sandbox: "s"}, {Name: "lo"}},
				IPs:    []IP{{Address: "10.0.0.2/24", Gateway: "10.0.0.1", Interface: &one}, {Address: "::1/128", Interface: &zero}},
				Routes: []result.WireRoute{{Dst: "0.0.0.0/0", GW: "10.0.0.1"}, {Dst: "::/0"}}},
			Error:   &Error{Code: 11, Msg: "busy", Details: "later"},
			TraceID: "t", SpanID: "s", ParentSpanID: "p", CNIArgs: map[string]string{"b": "2", "a": "1", "K": "\u2029"},
			ArgsKeys: []string{"x", "y"}, RuntimeConfigKeys: []string{"portMappings"},
			Args: json.RawMessage(`{ "a" : [1, 2] }`), RuntimeConfig: json.RawMessage(`{"portMappings":[{"hostPort":80}]}`),
		},
		"result without interfaces": {Result: &Result{IPs: []IP{{Address: "a"}}}, Steps: []Step{}},
		"empty result":              {Result: &Result{}, Error: &Error{}},
		"negative and huge":         {DurationMs: -0.5, Steps: []Step{{DurationMs: 1e-7, StartMs: 123456789012345678901234.0}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := e.Line()
			require.NoError(t, err)
			assert.Equal(t, viaEncodingJSON(t, &e), string(got))
		})
	}
	bad := Entry{Args: json.RawMessage(`{bad`)}
	_, err := bad.Line()
	assert.Error(t, err)
}

// BenchmarkLine: the hand-written encoder against encoding/json, warm (a fresh
// process pays encoding/json's first-use cost on top, see Line).
func BenchmarkLine(b *testing.B) {
	e := Entry{Time: time.Now(), Command: "ADD", Plugin: "bridge", Network: "n", ContainerID: "c", Steps: []Step{{Name: "ipam", DurationMs: 1}},
		CNIArgs: map[string]string{"K8S_POD_NAME": "web-0"}}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			_, _ = e.Line()
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(&e)
		}
	})
}

func FuzzLine(f *testing.F) {
	f.Add("ADD", "n<x>", "\u2028\xff", 1.5, uint(7), `{"a":1}`)
	f.Add("", "", "", 0.0, uint(0), "")
	f.Fuzz(func(t *testing.T, command, network, msg string, dur float64, code uint, raw string) {
		e := Entry{Command: command, Network: network, DurationMs: dur, Steps: []Step{{Name: msg, Error: msg, StartMs: -dur}},
			Error: &Error{Code: code, Msg: msg}, CNIArgs: map[string]string{msg: network}, ArgsKeys: []string{command}}
		if json.Valid([]byte(raw)) {
			e.Args = json.RawMessage(raw)
		}
		want, err := json.Marshal(&e)
		got, gerr := e.Line()
		if err != nil {
			if gerr == nil && !json.Valid(got) {
				t.Fatalf("encoding/json refused %+v (%v), Line wrote invalid JSON %q", e, err, got)
			}
			return
		}
		if gerr != nil || string(got) != string(want)+"\n" {
			t.Fatalf("Line: %q, %v\nencoding/json: %q", got, gerr, want)
		}
	})
}

// BenchmarkAppendString: the quoting of the log's strings, plain ASCII (most of them:
// names, ids, paths) and text with every kind of escape.
func BenchmarkAppendString(b *testing.B) {
	for name, s := range map[string]string{
		"plain":   "/var/run/netns/cni-1234abcd-5678-90ef-aaaa-bbbbccccdddd",
		"escaped": "a \"quoted\" <tag> & line\nbreak\ttab\x01 é\u2028 \xff end",
	} {
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			for b.Loop() {
				buf = appendString(buf[:0], s)
			}
		})
	}
}

// TestAppendArray: an empty list is left out, the first member of an object has no
// comma before it and a later one has, elements are comma-separated.
func TestAppendArray(t *testing.T) {
	elem := func(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }
	assert.Equal(t, "{", string(appendArray([]byte("{"), 1, "a", []int{}, elem)))
	assert.Equal(t, `{"a":[1]`, string(appendArray([]byte("{"), 1, "a", []int{1}, elem)))
	assert.Equal(t, `{"x":0,"a":[1,2,3]`, string(appendArray([]byte(`{"x":0`), 1, "a", []int{1, 2, 3}, elem)))
}
