package chain_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestRunnerTracesEveryPluginOfAnOperation(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	dir := pluginDir(t)
	rec := filepath.Join(t.TempDir(), "rec")
	logFile := filepath.Join(t.TempDir(), "cni.log")
	r := newRunner(t, dir)
	r.Env = append(r.Env, "CNI_LOG_FILE="+logFile)
	n := parse(t, `{"cniVersion":"1.1.0","name":"traced","plugins":[{"type":"loopback"},`+recorderConf(rec)+`]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}

	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 1, "loopback logs; the recorder is a third-party plugin")
	lo := lines[0]
	assert.Equal(t, "loopback", lo.Plugin)
	require.Len(t, lo.TraceID, 32, "the runner starts a trace when none is given")
	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	assert.Equal(t, fmt.Sprintf("00-%s-%s-01", lo.TraceID, lo.ParentSpanID), recs[0].Trace["TRACEPARENT"],
		"the exec'd plugin runs under the same span of the runner as the in-process one")

	given := tracectx.New()
	r.Env = append(r.Env, "TRACEPARENT="+given.Traceparent(), "BAGGAGE=user=alice")
	require.NoError(t, r.Del(context.Background(), n, att))
	lines = invlogtest.Lines(t, logFile)
	require.Len(t, lines, 2)
	assert.Equal(t, given.TraceID.String(), lines[1].TraceID, "TRACEPARENT in the runner's environment is the runtime's trace")
	assert.Equal(t, given.SpanID.String(), lines[1].ParentSpanID)
	recs = readRecords(t, rec)
	require.Len(t, recs, 2)
	assert.Equal(t, given.Traceparent(), recs[1].Trace["TRACEPARENT"])
	assert.Equal(t, "user=alice", recs[1].Trace["BAGGAGE"], "baggage travels on")
}

func TestChainPluginsLogObjectReachesItsChildren(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	logFile := filepath.Join(t.TempDir(), "cni.log")
	r := newRunner(t, t.TempDir())
	n := parse(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":"one","plugins":[
		{"type":"chain","log":{"file":%q},"plugins":[{"type":"loopback"}]}]}`, logFile))
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	ctx := tracectx.With(context.Background(), tracectx.New())

	_, err := r.Add(ctx, n, att)
	require.NoError(t, err)
	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 2)
	child, parent := lines[0], lines[1]
	assert.Equal(t, "loopback", child.Plugin)
	assert.Equal(t, "chain", parent.Plugin)
	assert.Equal(t, parent.TraceID, child.TraceID)
	assert.Equal(t, parent.SpanID, child.ParentSpanID, "a chain child is a child span of the chain")
	want, _ := tracectx.From(ctx)
	assert.Equal(t, want.SpanID.String(), parent.ParentSpanID, "the caller's span is the chain's parent")
}
