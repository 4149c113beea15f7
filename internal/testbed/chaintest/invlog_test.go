package chaintest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/invlog/invlogtest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// tracingExec is libcni's exec with the trace-context injection libcni gained after
// v1.3.0 (containernetworking/cni #1173): for a caller with a span, TRACEPARENT (and
// TRACESTATE, BAGGAGE when set) appended after the environment libcni built.
type tracingExec struct {
	*invoke.DefaultExec
	span tracectx.Span
}

func (e *tracingExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	return e.DefaultExec.ExecPlugin(ctx, path, stdin, append(environ, "TRACEPARENT="+e.span.Traceparent(), "BAGGAGE=user.id=alice"))
}
func TestTraceContextThroughLibcniToADelegateAndBackInTheLog(t *testing.T) {
	testns.RequireRoot(t)
	host, cont := testns.NewWithLoopback(t), testns.New(t)
	logFile := filepath.Join(t.TempDir(), "cni.log")
	// "ext-host-local" is our host-local under a name bridge does not know as built in:
	// bridge execs it, as it would a third-party IPAM, and it logs as a process of its own.
	dir := testns.LinkPluginDir(t, "bridge", "ext-host-local")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"traced","plugins":[{"type":"bridge","bridge":"cnitr0",
		"isGateway":true,"log":{"file":%q},"ipam":{"type":"ext-host-local","dataDir":%q,
		"ranges":[[{"subnet":"10.77.0.0/24"}]]}}]}`, logFile, t.TempDir())
	list, err := libcni.ConfListFromBytes([]byte(conf))
	require.NoError(t, err)
	runtime := tracectx.New()
	exe := &tracingExec{DefaultExec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}}, span: runtime}
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), exe)
	rt := &libcni.RuntimeConf{ContainerID: "traced1", NetNS: cont.Path, IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "prod"}, {"K8S_POD_NAME", "web-0"}, {"IgnoreUnknown", "1"}}}
	host.Run(t, func() error {
		_, err := cni.AddNetworkList(context.Background(), list, rt)
		return err
	})
	host.Run(t, func() error { return cni.DelNetworkList(context.Background(), list, rt) })

	lines := invlogtest.Lines(t, logFile)
	require.Len(t, lines, 4, "bridge and its delegate, for ADD and for DEL")
	ipamAdd, bridgeAdd := lines[0], lines[1]
	assert.Equal(t, "host-local", ipamAdd.Plugin)
	assert.Equal(t, "bridge", bridgeAdd.Plugin)
	for _, e := range lines {
		assert.Equal(t, runtime.TraceID.String(), e.TraceID, "%s %s is in the runtime's trace", e.Plugin, e.Command)
		assert.Equal(t, "web-0", e.CNIArgs["K8S_POD_NAME"])
	}
	assert.Equal(t, runtime.SpanID.String(), bridgeAdd.ParentSpanID, "bridge is a child of the runtime's span")
	var ipamStep *invlog.Step
	var names []string
	for i, s := range bridgeAdd.Steps {
		names = append(names, s.Name)
		if s.Name == steps.IPAM {
			ipamStep = &bridgeAdd.Steps[i]
		}
	}
	require.NotNil(t, ipamStep, "steps: %v", names)
	assert.Equal(t, ipamStep.SpanID, ipamAdd.ParentSpanID, "the exec'd delegate is a child of bridge's IPAM step")
	assert.Subset(t, names, []string{steps.LinkCreate, steps.IPAM, steps.Addresses, steps.WaitLinkUp})
	assert.Less(t, ipamAdd.DurationMs, ipamStep.DurationMs, "the delegate ran within the step")
	require.NotNil(t, bridgeAdd.Result)
	assert.Equal(t, "10.77.0.2/24", bridgeAdd.Result.IPs[0].Address)

	bridgeDel := lines[3]
	assert.Equal(t, "DEL", bridgeDel.Command)
	assert.Equal(t, runtime.SpanID.String(), bridgeDel.ParentSpanID)
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "alice", "baggage is passed on, never logged")
}

// TestParallelStreamsOfAddAndDelLoseNoLogLine runs 8 streams of exec'd ADD and DEL, each
// process appending to one log that rotates every 8 KiB, and reads every line back.
func TestParallelStreamsOfAddAndDelLoseNoLogLine(t *testing.T) {
	const streams, rounds = 8, 20
	bin := testns.Binary(t)
	logFile := filepath.Join(t.TempDir(), "cni.log")
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"streams","ipam":{"type":"host-local","dataDir":%q,
		"ranges":[[{"subnet":"10.78.0.0/16"}]]},"log":{"file":%q,"maxSizeMB":0.0078125,"maxFiles":100}}`, t.TempDir(), logFile)
	var wg sync.WaitGroup
	errs := make([]error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				for _, cmd := range []string{"ADD", "DEL"} {
					if err := execPlugin(bin, "host-local", cmd, fmt.Sprintf("s%d-%d", s, i), conf); err != nil {
						errs[s] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	rotated, err := invlog.Rotated(logFile)
	require.NoError(t, err)
	assert.Greater(t, len(rotated), 5, "the streams rotate the log many times")
	seen := map[string]int{}
	for _, e := range invlogtest.Lines(t, logFile) {
		require.Nil(t, e.Error, "%s %s", e.Command, e.ContainerID)
		seen[e.Command+" "+e.ContainerID]++
	}
	for s := range streams {
		for i := range rounds {
			for _, cmd := range []string{"ADD", "DEL"} {
				assert.Equal(t, 1, seen[fmt.Sprintf("%s s%d-%d", cmd, s, i)], "one line for %s of s%d-%d", cmd, s, i)
			}
		}
	}
}

// execPlugin runs the binary as plugin name, as a runtime would.
func execPlugin(bin, name, command, containerID, conf string) error {
	dir, err := os.MkdirTemp("", "cni-streams-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	link := filepath.Join(dir, name)
	if err := os.Symlink(bin, link); err != nil {
		return err
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(link)
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=/var/run/netns/streams",
		"CNI_IFNAME=eth0", "CNI_PATH=" + dir, "CNI_NETNS_OVERRIDE=1"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(conf), &out, &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s %s: %v: %s %s", name, command, containerID, err, out.String(), errb.String())
	}
	return nil
}
