package logreport

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/obs/invlog"
)

func entries() []*invlog.Entry {
	var out []*invlog.Entry
	for i := 1; i <= 100; i++ {
		out = append(out, &invlog.Entry{Plugin: "bridge", Command: "ADD", DurationMs: float64(i)})
	}
	out = append(out,
		&invlog.Entry{Plugin: "bridge", Command: "ADD", DurationMs: 500, Error: &invlog.Error{Code: 11, Msg: "busy"}},
		&invlog.Entry{Plugin: "bridge", Command: "DEL", DurationMs: 30},
		&invlog.Entry{Plugin: "host-local", Command: "ADD", DurationMs: 0.5, Error: &invlog.Error{Code: 7, Msg: "bad"}},
		&invlog.Entry{Plugin: "host-local", Command: "ADD", DurationMs: 0.25, Error: &invlog.Error{Code: 7, Msg: "bad"}},
	)
	return out
}

func TestStatsCountQuantilesAndCodes(t *testing.T) {
	var s Stats
	for _, e := range entries() {
		s.Add(e)
	}
	rows := s.Rows()
	require.Len(t, rows, 3)
	add := rows[0]
	assert.Equal(t, Key{"bridge", "ADD"}, add.Key)
	assert.Equal(t, 101, add.Count)
	assert.Equal(t, 1, add.Errors)
	assert.Equal(t, 51*time.Millisecond, add.P50)
	assert.Equal(t, 91*time.Millisecond, add.P90)
	assert.Equal(t, 100*time.Millisecond, add.P99)
	assert.Equal(t, map[uint]int{11: 1}, add.Codes)
	assert.Equal(t, Key{"bridge", "DEL"}, rows[1].Key)
	assert.Equal(t, Key{"host-local", "ADD"}, rows[2].Key)
	assert.Equal(t, 2, rows[2].Codes[7])

	var table bytes.Buffer
	require.NoError(t, s.WriteTable(&table))
	assert.Contains(t, table.String(), "bridge       ADD         101       1     51.00     91.00    100.00\n")
	assert.Contains(t, table.String(), "errors by code:\n  bridge       ADD     code 11   1\n  host-local   ADD     code 7    2\n")
}

func TestPrometheusTextFormat(t *testing.T) {
	var s Stats
	for _, e := range entries() {
		s.Add(e)
	}
	s.Add(&invlog.Entry{Plugin: `we"ird`, Command: "ADD", DurationMs: 1})
	var b bytes.Buffer
	require.NoError(t, s.WritePrometheus(&b, 3))
	out := b.String()
	for _, line := range []string{
		"# TYPE cni_invocations gauge",
		`cni_invocations{plugin="bridge",command="ADD"} 101`,
		`cni_invocation_errors{plugin="bridge",command="ADD",code="11"} 1`,
		`cni_invocation_errors{plugin="host-local",command="ADD",code="7"} 2`,
		`cni_invocation_duration_seconds{plugin="bridge",command="ADD",quantile="0.5"} 0.051`,
		`cni_invocation_duration_seconds{plugin="bridge",command="DEL",quantile="0.99"} 0.03`,
		`cni_invocations{plugin="we\"ird",command="ADD"} 1`,
		"cni_log_unreadable_lines 3",
	} {
		assert.Contains(t, out, line+"\n")
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, "#") {
			assert.True(t, strings.HasPrefix(line, "cni_"), "metric names start cni_: %s", line)
		}
	}
}

func TestOTLPSpansOfAnEntry(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	e := &invlog.Entry{
		Time: start, Plugin: "bridge", Command: "ADD", Network: "n", ContainerID: "c1", DurationMs: 12.5, Version: "v1",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", ParentSpanID: "1111111111111111",
		CNIArgs: map[string]string{"K8S_POD_NAME": "web-0", "K8S_POD_NAMESPACE": "prod"},
		Steps:   []invlog.Step{{Name: "ipam", StartMs: 1, DurationMs: 2, SpanID: "2222222222222222", Error: "exhausted"}},
		Error:   &invlog.Error{Code: 11, Msg: "exhausted"},
	}
	b, ok := OTLP(e)
	require.True(t, ok)
	var req struct {
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []map[string]any `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	require.NoError(t, json.Unmarshal(b, &req))
	spans := req.ResourceSpans[0].ScopeSpans[0].Spans
	require.Len(t, spans, 2)
	assert.Equal(t, "bridge ADD", spans[0]["name"])
	assert.Equal(t, "1111111111111111", spans[0]["parentSpanId"])
	assert.Equal(t, "1796119200000000000", spans[0]["startTimeUnixNano"])
	assert.Equal(t, "1796119200012500000", spans[0]["endTimeUnixNano"])
	assert.Equal(t, map[string]any{"code": 2.0, "message": "exhausted"}, spans[0]["status"])
	assert.Contains(t, string(b), `{"key":"k8s.pod.name","value":{"stringValue":"web-0"}}`)
	assert.Contains(t, string(b), `{"key":"cni.error.code","value":{"intValue":"11"}}`)
	assert.Equal(t, "ipam", spans[1]["name"])
	assert.Equal(t, "00f067aa0ba902b7", spans[1]["parentSpanId"])
	assert.Equal(t, "1796119200001000000", spans[1]["startTimeUnixNano"])

	_, ok = OTLP(&invlog.Entry{Plugin: "bridge"})
	assert.False(t, ok, "no trace, no spans")
}

func TestDurationsAreTheLogsMillisecondsExactly(t *testing.T) {
	var s Stats
	s.Add(&invlog.Entry{Plugin: "bridge", Command: "ADD", DurationMs: 16.569})
	rows := s.Rows()
	require.Len(t, rows, 1)
	assert.Equal(t, 16569*time.Microsecond, rows[0].P50)
	var b bytes.Buffer
	require.NoError(t, s.WritePrometheus(&b, 0))
	assert.Contains(t, b.String(), `cni_invocation_duration_seconds{plugin="bridge",command="ADD",quantile="0.5"} 0.016569`+"\n")
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	span, ok := OTLP(&invlog.Entry{Time: start, Plugin: "bridge", Command: "ADD", DurationMs: 16.569,
		TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"})
	require.True(t, ok)
	assert.Contains(t, string(span), `"endTimeUnixNano":"`+strconv.FormatInt(start.Add(16569*time.Microsecond).UnixNano(), 10)+`"`)
}
