package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestBuiltinRunsInProcessWithoutABinaryOnThePath(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	r := newRunner(t, t.TempDir()) // an empty plugin dir: loopback can only run in-process
	n := parse(t, `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}

	res, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", res.CNIVersion)
	assert.True(t, loUp(t, ctr))
	require.NoError(t, r.Check(context.Background(), n, att))
	require.NoError(t, r.Del(context.Background(), n, att))
	assert.False(t, loUp(t, ctr))
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

func TestExternalPluginThreadsPrevResultAndGetsCapabilities(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	dir := pluginDir(t)
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, dir)
	n := parse(t, `{"cniVersion":"1.0.0","name":"mixed","plugins":[{"type":"loopback"},`+
		recorderConf(rec, `"capabilities":{"portMappings":true,"bandwidth":false}`, `"runtimeConfig":{"static":1}`)+`]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", Args: [][2]string{{"K", "V"}, {"IgnoreUnknown", "1"}},
		CapabilityArgs: map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080.0}}, "bandwidth": map[string]any{"egressRate": 1.0}}}

	res, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	require.Len(t, res.Interfaces, 2, "loopback's interface, then the recorder's")
	assert.Equal(t, "lo", res.Interfaces[0].Name)
	assert.Equal(t, "rec-eth0", res.Interfaces[1].Name)

	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	conf := recs[0].conf(t)
	assert.Equal(t, "mixed", conf["name"])
	assert.Equal(t, "1.0.0", conf["cniVersion"])
	assert.Equal(t, map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080.0}}}, conf["runtimeConfig"],
		"only the declared capability, replacing the static runtimeConfig")
	prev := conf["prevResult"].(map[string]any)
	assert.Equal(t, "lo", prev["interfaces"].([]any)[0].(map[string]any)["name"])
	assert.Equal(t, map[string]string{
		"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": ctr.Path, "CNI_IFNAME": "eth0",
		"CNI_ARGS": "K=V;IgnoreUnknown=1", "CNI_PATH": dir,
	}, recs[0].Env)

	require.NoError(t, r.Check(context.Background(), n, att))
	require.NoError(t, r.Del(context.Background(), n, att))
	recs = readRecords(t, rec)
	require.Len(t, recs, 3)
	for _, rc := range recs[1:] {
		prev := rc.conf(t)["prevResult"].(map[string]any)
		assert.Len(t, prev["interfaces"], 2, "%s gets the cached final result", rc.Command)
	}
	assert.Equal(t, []string{"ADD", "CHECK", "DEL"}, []string{recs[0].Command, recs[1].Command, recs[2].Command})
}

func TestStaticRuntimeConfigStaysWithoutMatchingCapabilityArgs(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+
		recorderConf(rec, `"capabilities":{"portMappings":true}`, `"runtimeConfig":{"static":1}`)+`]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0",
		CapabilityArgs: map[string]any{"bandwidth": 1}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"static": 1.0}, readRecords(t, rec)[0].conf(t)["runtimeConfig"])
}

func TestDelRunsInReverseOrder(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+
		recorderConf(rec, `"tag":"first"`)+`,`+recorderConf(rec, `"tag":"second"`)+`]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	require.NoError(t, r.Del(context.Background(), n, att))
	var order []string
	for _, rc := range readRecords(t, rec) {
		order = append(order, rc.Command+" "+rc.conf(t)["tag"].(string))
	}
	assert.Equal(t, []string{"ADD first", "ADD second", "DEL second", "DEL first"}, order)
	assert.Empty(t, cacheFiles(t, r.CacheDir), "DEL removed the cache entry")
}

func TestExternalPluginErrorKeepsItsCodeAndNamesThePlugin(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"mynet","plugins":[{"type":"loopback"},`+
		recorderConf(rec, `"fail":{"ADD":{"code":7,"msg":"mtu: out of range","details":"got 1"}}`)+`]}`)

	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	var pe *chain.PluginError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "recorder", pe.Type)
	assert.Equal(t, "add", pe.Step)
	assert.Equal(t, uint(7), cnierror.Code(err))
	assert.EqualError(t, err, `plugin type="recorder" name="mynet" failed (add): mtu: out of range; got 1`)
	assert.Empty(t, cacheFiles(t, r.CacheDir), "a failed ADD caches nothing")
}

func TestExternalPluginFailingWithoutJSONReportsItsStderr(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec, `"stderrOnly":["ADD"]`)+`]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.ErrorContains(t, err, `netplugin failed: "recorder: asked to fail without a message\n": exit status 1`, "libcni's words since its #1163")
	assert.Empty(t, cacheFiles(t, r.CacheDir), "a failed ADD caches nothing")
}

func TestExternalResultWithoutVersionTakesTheConfigVersion(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"0.4.0","name":"n","plugins":[`+recorderConf(rec, `"omitVersion":true`)+`]}`)
	res, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)
	assert.Equal(t, "0.4.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 1)
}

func TestMissingPluginIsAnErrorNamingThePath(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, dir)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"nosuch"}]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: "/proc/self/ns/net", IfName: "eth0"})
	require.ErrorContains(t, err, fmt.Sprintf(`plugin type="nosuch" name="n" failed (add): failed to find plugin "nosuch" in path [%s]`, dir))
	assert.Empty(t, cacheFiles(t, r.CacheDir), "a failed ADD caches nothing")
}

// TestInvalidAttachmentRunsNoPlugin: ADD and CHECK refuse an invalid attachment before
// any plugin runs (DEL does not: see TestDelDoesNotValidateTheAttachment).
func TestInvalidAttachmentRunsNoPlugin(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	cases := []struct {
		name string
		att  chain.Attachment
		msg  string
	}{
		{"no container id", chain.Attachment{IfName: "eth0", Netns: "/x"}, "missing containerID"},
		{"bad container id", chain.Attachment{ContainerID: "../etc", IfName: "eth0", Netns: "/x"}, "invalid characters in containerID"},
		{"bad ifname", chain.Attachment{ContainerID: "c", IfName: "a/b", Netns: "/x"}, "invalid character"},
		{"long ifname", chain.Attachment{ContainerID: "c", IfName: strings.Repeat("e", 16), Netns: "/x"}, "longer than 15"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Add(context.Background(), n, tc.att)
			require.ErrorContains(t, err, tc.msg)
			assert.Equal(t, uint(cnierror.CodeInvalidEnv), cnierror.Code(err))
			require.ErrorContains(t, r.Check(context.Background(), n, tc.att), tc.msg)
		})
	}
	assert.Empty(t, readRecords(t, rec))
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

// TestDelDoesNotRefuseTheAttachment: DEL runs the plugins for an attachment a libcni
// runtime can have added, also with a name ADD here refuses ("e\x7f": the kernel and
// libcni take it; DEL failed with code 4 before). One that no ADD can have made (an id
// against the spec's rule, a name the kernel refuses: skel.Attachable) has nothing to
// delete: DEL succeeds and runs no plugin (the reference's would refuse it for ever).
// Such an id reaches no cache entry: the entry a "../" in it would name, outside
// results/, is neither read nor removed.
func TestDelDoesNotRefuseTheAttachment(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)

	require.NoError(t, r.Del(context.Background(), n, chain.Attachment{ContainerID: "c1", IfName: "e\x7f"}))
	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	assert.Equal(t, "DEL", recs[0].Command)
	assert.Equal(t, "e\x7f", recs[0].Env["CNI_IFNAME"])

	// "n-a/../../victim-eth0" in results/ would be <cacheDir>/victim-eth0.
	require.NoError(t, os.MkdirAll(filepath.Join(r.CacheDir, "results", "n-a"), 0o700))
	victim := filepath.Join(r.CacheDir, "victim-eth0")
	writeFile(t, victim, `{"kind":"cniCacheV1","containerId":"a","ifName":"eth0","networkName":"n","result":{"cniVersion":"1.1.0","interfaces":[{"name":"x"}]}}`)
	for _, att := range []chain.Attachment{{ContainerID: "a/../../victim", IfName: "eth0"},
		{ContainerID: "c1", IfName: strings.Repeat("e", 16)}, {ContainerID: "c1", IfName: "a/b"}} {
		require.NoError(t, r.Del(context.Background(), n, att), "%+v", att)
	}
	assert.FileExists(t, victim)
	assert.Len(t, readRecords(t, rec), 1, "no plugin ran for what no ADD can have made")
}

func TestCheckRules(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}

	old := parse(t, `{"cniVersion":"0.3.1","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	err := r.Check(context.Background(), old, att)
	require.ErrorContains(t, err, `configuration version "0.3.1" does not support the CHECK command`)

	disabled := parse(t, `{"cniVersion":"1.1.0","name":"n","disableCheck":true,"plugins":[`+recorderConf(rec)+`]}`)
	require.NoError(t, r.Check(context.Background(), disabled, att))

	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	require.NoError(t, r.Check(context.Background(), n, att), "no cache: CHECK runs without prevResult")
	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	assert.NotContains(t, recs[0].conf(t), "prevResult")
}

func TestDelSurvivesAnEmptyOrCorruptCacheAndRemovesIt(t *testing.T) {
	testns.RequireRoot(t)
	for _, content := range []string{"", "{not json", `{"kind":"cniCacheV1","result":{"cniVersion":"1.1.0","ips":[{"address":"nope"}]}}`} {
		t.Run(fmt.Sprintf("%q", content), func(t *testing.T) {
			ctr, rec, r := recordingRunner(t)
			n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
			att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
			writeFile(t, filepath.Join(r.CacheDir, "results", "n-c1-eth0"), content)

			require.Error(t, r.Check(context.Background(), n, att), "CHECK refuses an unusable cache")
			require.NoError(t, r.Del(context.Background(), n, att))
			recs := readRecords(t, rec)
			require.Len(t, recs, 1)
			assert.NotContains(t, recs[0].conf(t), "prevResult")
			assert.Empty(t, cacheFiles(t, r.CacheDir))
		})
	}
}

func TestDelOfANetworkBelow040SendsNoPrevResult(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"0.3.1","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	require.NoError(t, r.Del(context.Background(), n, att))
	recs := readRecords(t, rec)
	require.Len(t, recs, 2)
	assert.NotContains(t, recs[1].conf(t), "prevResult")
}

func TestCacheEntryHasLibcniFormatAndModes(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	r := newRunner(t, t.TempDir())
	conf := `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`
	n := parse(t, conf)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", Args: [][2]string{{"A", "B"}},
		CapabilityArgs: map[string]any{"x": "y"}}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)

	path := filepath.Join(r.CacheDir, "results", "lo-c1-eth0")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	var entry map[string]any
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &entry))
	assert.Equal(t, "cniCacheV1", entry["kind"])
	assert.Equal(t, "c1", entry["containerId"])
	assert.Equal(t, "eth0", entry["ifName"])
	assert.Equal(t, "lo", entry["networkName"])
	assert.Equal(t, ctr.Path, entry["netns"])
	assert.Equal(t, []any{[]any{"A", "B"}}, entry["cniArgs"])
	assert.Equal(t, map[string]any{"x": "y"}, entry["capabilityArgs"])
	var cfg []byte
	require.NoError(t, json.Unmarshal(mustJSON(t, entry["config"]), &cfg), "config is base64")
	assert.Equal(t, conf, string(cfg))
	assert.Equal(t, "1.1.0", entry["result"].(map[string]any)["cniVersion"])

	cached, err := r.CachedAttachments("c1")
	require.NoError(t, err)
	require.Len(t, cached, 1)
	assert.Equal(t, "lo", cached[0].Network)
	assert.Equal(t, att.Netns, cached[0].Netns)
	require.NoError(t, r.Del(context.Background(), n, att))
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestGCDeletesStaleAttachmentsAndSendsTheValidList(t *testing.T) {
	testns.RequireRoot(t)
	ctr1, ctr2 := testns.New(t), testns.New(t)
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	other := parse(t, `{"cniVersion":"1.1.0","name":"other","plugins":[{"type":"loopback"}]}`)
	keep := chain.Attachment{ContainerID: "keep", Netns: ctr1.Path, IfName: "eth0"}
	stale := chain.Attachment{ContainerID: "stale", Netns: ctr2.Path, IfName: "eth1", Args: [][2]string{{"IgnoreUnknown", "1"}}}
	for _, att := range []chain.Attachment{keep, stale} {
		_, err := r.Add(context.Background(), n, att)
		require.NoError(t, err)
	}
	_, err := r.Add(context.Background(), other, stale)
	require.NoError(t, err)

	valid := []skel.Attachment{{ContainerID: "keep", IfName: "eth0"}}
	require.NoError(t, r.GC(context.Background(), n, &chain.GCArgs{ValidAttachments: valid}))

	recs := readRecords(t, rec)[2:]
	require.Len(t, recs, 2)
	assert.Equal(t, "DEL", recs[0].Command)
	assert.Equal(t, map[string]string{"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "stale", "CNI_NETNS": ctr2.Path,
		"CNI_IFNAME": "eth1", "CNI_ARGS": "IgnoreUnknown=1", "CNI_PATH": r.PluginPath[0]}, recs[0].Env, "cached netns and args")
	assert.Contains(t, recs[0].conf(t), "prevResult")
	assert.Equal(t, "GC", recs[1].Command)
	assert.Equal(t, map[string]string{"CNI_COMMAND": "GC", "CNI_CONTAINERID": "", "CNI_NETNS": "", "CNI_IFNAME": "",
		"CNI_ARGS": "", "CNI_PATH": r.PluginPath[0]}, recs[1].Env)
	gc := recs[1].conf(t)
	want := []any{map[string]any{"containerID": "keep", "ifname": "eth0"}}
	assert.Equal(t, want, gc["cni.dev/valid-attachments"])
	assert.Equal(t, want, gc["cni.dev/attachments"])

	assert.ElementsMatch(t, []string{"n-keep-eth0", "other-stale-eth1"}, cacheFiles(t, r.CacheDir),
		"only the stale attachment of this network is gone")
}

func TestGCWithoutArgsTreatsEveryAttachmentAsStale(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)
	require.NoError(t, r.GC(context.Background(), n, nil))
	recs := readRecords(t, rec)
	require.Len(t, recs, 3)
	assert.Equal(t, "DEL", recs[1].Command)
	assert.NotContains(t, recs[2].conf(t), "cni.dev/valid-attachments")
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

func TestGCKeepsGoingAndReportsEveryError(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	failing := recorderConf(rec, `"fail":{"DEL":{"code":11,"msg":"busy"},"GC":{"code":999,"msg":"gc broke"}}`)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+failing+`,`+recorderConf(rec)+`]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)

	err = r.GC(context.Background(), n, nil)
	require.ErrorContains(t, err, "failed to delete stale attachment c1 eth0")
	require.ErrorContains(t, err, "busy")
	require.ErrorContains(t, err, `plugin type="recorder" name="n" failed (gc): gc broke`)
	var cmds []string
	for _, rc := range readRecords(t, rec)[2:] {
		cmds = append(cmds, rc.Command)
	}
	assert.Equal(t, []string{"DEL", "DEL", "GC", "GC"}, cmds, "DEL stops at the failure; GC reaches every plugin")
	assert.Equal(t, []string{"n-c1-eth0"}, cacheFiles(t, r.CacheDir), "the attachment whose DEL failed keeps its entry for the next GC")
}

func TestGCAndStatusHonourVersionAndDisableGC(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	fail := recorderConf(rec, `"fail":{"GC":{"code":1,"msg":"x"},"STATUS":{"code":50,"msg":"x"}}`)
	disabled := parse(t, `{"cniVersion":"1.1.0","name":"n","disableGC":true,"plugins":[`+fail+`]}`)
	require.NoError(t, r.GC(context.Background(), disabled, nil))
	old := parse(t, `{"cniVersion":"1.0.0","name":"n","plugins":[`+fail+`]}`)
	require.NoError(t, r.GC(context.Background(), old, nil))
	require.NoError(t, r.Status(context.Background(), old))
	assert.Empty(t, readRecords(t, rec))
}

func TestStatusSurfacesThePluginsCode(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"loopback"},`+
		recorderConf(rec, `"fail":{"STATUS":{"code":50,"msg":"not ready"}}`)+`,`+recorderConf(rec)+`]}`)
	err := r.Status(context.Background(), n)
	var pe *chain.PluginError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "status", pe.Step)
	assert.Equal(t, uint(cnierror.CodeNotAvailable), pe.Code())
	var ce *cnierror.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "not ready", ce.Msg)
	assert.Len(t, readRecords(t, rec), 1, "STATUS stops at the first failure")
}

func TestTimeoutKillsAnExecdPlugin(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	r.Timeout = 100 * time.Millisecond
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec, `"sleep":{"ADD":"1m"}`)+`]}`)
	_, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.ErrorContains(t, err, "netplugin did not finish: context deadline exceeded")
	assert.Empty(t, cacheFiles(t, r.CacheDir))
}

func TestTextFileBusyIsRetriedWithAFreshCommand(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	dir := t.TempDir()
	src, err := recorder.Path()
	require.NoError(t, err)
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	// A binary still open for writing cannot be exec'd (ETXTBSY), as while an installer
	// copies it; it becomes runnable once the writer closes it.
	w, err := os.OpenFile(filepath.Join(dir, "recorder"), os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	time.AfterFunc(30*time.Millisecond, func() { w.Close() })

	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, dir)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	_, err = r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)
	assert.Len(t, readRecords(t, rec), 1)
}

func TestInvokeAndVersionRunOnePlugin(t *testing.T) {
	r := newRunner(t, pluginDir(t))
	vi, err := r.Version(context.Background(), "recorder")
	require.NoError(t, err)
	assert.Equal(t, []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"}, vi.SupportedVersions)
	vi, err = r.Version(context.Background(), "loopback")
	require.NoError(t, err)
	assert.Contains(t, vi.SupportedVersions, "1.1.0")

	_, err = r.Invoke(context.Background(), "recorder", skel.CmdStatus, []byte(`{"cniVersion":"1.1.0","name":"n","fail":{"STATUS":{"code":51,"msg":"degraded"}}}`), chain.Attachment{})
	assert.Equal(t, uint(51), cnierror.Code(err))
	assert.ErrorContains(t, err, "degraded")
}

// disableGC stops GC before anything runs, the runner's own DELs of stale cache entries
// included, as libcni's GCNetworkList returns at once (upstream row C1).
func TestDisableGCSkipsTheStaleCacheDelsToo(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	list := `"plugins":[` + recorderConf(rec) + `]}`
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), parse(t, `{"cniVersion":"1.1.0","name":"n",`+list), att)
	require.NoError(t, err)
	require.NoError(t, r.GC(context.Background(), parse(t, `{"cniVersion":"1.1.0","name":"n","disableGC":"true",`+list), nil))
	recs := readRecords(t, rec)
	require.Len(t, recs, 1, "only the ADD ran")
	assert.Len(t, cacheFiles(t, r.CacheDir), 1, "the stale entry stays")
}

// GC on a node that never cached a result (no results directory) is no error: every
// plugin gets its GC (upstream row C2).
func TestGCWithoutAnyCacheRunsThePluginsGC(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	require.NoDirExists(t, filepath.Join(r.CacheDir, "results"))
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`]}`)
	require.NoError(t, r.GC(context.Background(), n, nil))
	recs := readRecords(t, rec)
	require.Len(t, recs, 1)
	assert.Equal(t, "GC", recs[0].Command)
}

// TestDelAndGCSkipAPluginThatCannotRunButNotOneThatFails: a plugin of the list that
// cannot run with the config (on no directory of the plugin path, or refusing the
// config's version with code 1) can have made nothing, so DEL and GC skip it, saying
// why, and go on to the plugins before it; they failed for ever, and so kept the
// earlier plugins' state. A plugin that runs and fails still fails the DEL ("try
// again"), which stops there as in libcni.
func TestDelAndGCSkipAPluginThatCannotRunButNotOneThatFails(t *testing.T) {
	for _, tc := range []struct {
		name, last string
		code       uint // 0: DEL and GC succeed
	}{
		{name: "not on the plugin path", last: `{"type":"nosuch"}`},
		{name: "its version refused", last: recorderConf(filepath.Join(t.TempDir(), "last"),
			`"fail":{"DEL":{"code":1,"msg":"incompatible CNI versions"},"GC":{"code":1,"msg":"incompatible CNI versions"}}`)},
		{name: "its DEL fails", last: recorderConf(filepath.Join(t.TempDir(), "last"),
			`"fail":{"DEL":{"code":11,"msg":"busy"},"GC":{"code":11,"msg":"busy"}}`), code: cnierror.CodeTryAgainLater},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "rec")
			var logs strings.Builder
			r := newRunner(t, pluginDir(t))
			r.Stderr = &logs
			n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[`+recorderConf(rec)+`,`+tc.last+`]}`)
			errDel := r.Del(context.Background(), n, chain.Attachment{ContainerID: "c1", IfName: "eth0"})
			errGC := r.GC(context.Background(), n, &chain.GCArgs{})
			var cmds []string
			for _, rc := range readRecords(t, rec) {
				cmds = append(cmds, rc.Command)
			}
			if tc.code != 0 {
				assert.Equal(t, tc.code, cnierror.Code(errDel), "%v", errDel)
				assert.Equal(t, tc.code, cnierror.Code(errGC), "%v", errGC)
				assert.Equal(t, []string{"GC"}, cmds, "DEL stops at the failure; GC reaches every plugin")
				return
			}
			require.NoError(t, errDel)
			require.NoError(t, errGC)
			assert.Equal(t, []string{"DEL", "GC"}, cmds, "the plugin before it deletes and collects its own")
			assert.Contains(t, logs.String(), "delete of plugin type=")
			assert.Contains(t, logs.String(), "gc of plugin type=")
			assert.Contains(t, logs.String(), "nothing to do, no ADD with this config can have run it")
		})
	}
}
