package flannel_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// An exec'd delegate runs under flannel's span, as libcni runs a plugin under its
// caller's: TRACEPARENT names flannel's span in the runtime's trace.
func TestExecdDelegateRunsUnderFlannelsSpan(t *testing.T) {
	runtime := tracectx.New()
	t.Setenv("TRACEPARENT", runtime.Traceparent())
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	w.linkRecorder()
	records, logFile := filepath.Join(t.TempDir(), "records"), filepath.Join(t.TempDir(), "cni.log")
	c := w.conf(fmt.Sprintf(`"log":{"file":%q},"delegate":{"type":"recorder","recordFile":%q}`, logFile, records))

	_, err := w.invoke("ADD", "ctr-t", testns.NewWithLoopback(t).Path, c)
	require.NoError(t, err)

	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 1, "flannel logs; the recorder is a third-party plugin")
	assert.Equal(t, runtime.TraceID.String(), lines[0].TraceID)
	assert.Equal(t, runtime.SpanID.String(), lines[0].ParentSpanID)
	data, err := os.ReadFile(records)
	require.NoError(t, err)
	var got struct{ Trace map[string]string }
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(string(data))), &got))
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", lines[0].TraceID, lines[0].SpanID), got.Trace["TRACEPARENT"])
}
