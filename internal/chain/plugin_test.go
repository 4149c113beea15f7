package chain_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// chainOf is a list holding one chain plugin with the given children and extra keys.
func chainOf(v, name, extra string, children ...string) string {
	return `{"cniVersion":"` + v + `","name":"` + name + `","plugins":[{"type":"chain"` + extra +
		`,"plugins":[` + strings.Join(children, ",") + `]}]}`
}

// TestChainPluginRunsItsListAsLibcniRunsAConflist runs the same scenario (ADD, CHECK,
// a second ADD, GC keeping the first, STATUS, DEL twice) on a list of loopback and an
// exec'd plugin, written as a conflist and driven by libcni, then written as one chain
// plugin and driven by libcni and by our runner. The children must get the same
// invocations, byte for byte (name, cniVersion, prevResult, runtimeConfig for the
// declared capability only, CNI_* variables), and the runtime the same answers.
func TestChainPluginRunsItsListAsLibcniRunsAConflist(t *testing.T) {
	testns.RequireRoot(t)
	dir := pluginDir(t, "loopback", "chain")
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			outcomes := map[string]outcome{}
			for _, impl := range []string{"conflist by libcni", "chain by libcni", "chain by our runner"} {
				rec := filepath.Join(t.TempDir(), "rec")
				child := recorderConf(rec, `"capabilities":{"portMappings":true}`)
				conf := `{"cniVersion":"` + v + `","name":"std","plugins":[{"type":"loopback"},` + child + `]}`
				if impl != "conflist by libcni" {
					conf = chainOf(v, "std", `,"capabilities":{"portMappings":true}`, `{"type":"loopback"}`, child)
				}
				var rt runtime = newReference(t, dir, t.TempDir())
				if impl == "chain by our runner" {
					rt = ours{t: t, r: newRunner(t, dir)}
				}
				outcomes[impl] = scenario(t, rt, conf, rec, dir)
			}
			want := outcomes["conflist by libcni"]
			require.NotEmpty(t, want.Records)
			for _, impl := range []string{"chain by libcni", "chain by our runner"} {
				got := outcomes[impl]
				assert.Equal(t, want.Steps, got.Steps, impl)
				require.Equal(t, len(want.Records), len(got.Records), impl)
				for i, w := range want.Records {
					g := got.Records[i]
					assert.Equal(t, w.Command, g.Command, impl)
					assert.Equal(t, w.Env, g.Env, "%s: env of %s", impl, w.Command)
					assert.Equal(t, w.Stdin, g.Stdin, "%s: stdin of %s, byte for byte", impl, w.Command)
				}
			}
		})
	}
}

// TestChainPluginChainedAfterAnotherGetsItsResult: a chain that is itself a chained
// plugin starts its list from the prevResult it is given.
func TestChainPluginChainedAfterAnotherGetsItsResult(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"loopback"},{"type":"chain","plugins":[`+recorderConf(rec)+`]}]}`)
	res, err := r.Add(context.Background(), n, chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"})
	require.NoError(t, err)
	require.Len(t, res.Interfaces, 2)
	assert.Equal(t, "lo", res.Interfaces[0].Name)
	assert.Equal(t, "rec-eth0", res.Interfaces[1].Name)
	prev := readRecords(t, rec)[0].conf(t)["prevResult"].(map[string]any)
	assert.Len(t, prev["interfaces"], 1, "the recorder got loopback's result")
}

// TestChainPluginFailedAddUndoesTheChildrenBefore: the children that succeeded get
// DEL, in reverse order, with the last result they produced; the failing child does
// not (it cleans up after itself, and the runtime's DEL reaches it anyway). The error
// is the failing child's, code and all, naming it.
func TestChainPluginFailedAddUndoesTheChildrenBefore(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, chainOf("1.1.0", "n", "", `{"type":"loopback"}`, recorderConf(rec, `"tag":"first"`), recorderConf(rec, `"tag":"second"`),
		recorderConf(rec, `"tag":"third"`, `"fail":{"ADD":{"code":11,"msg":"busy","details":"try later"}}`)))
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}

	_, err := r.Add(context.Background(), n, att)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err))
	assert.EqualError(t, err, `plugin type="chain" name="n" failed (add): chain: recorder: busy; try later`)

	var steps []string
	recs := readRecords(t, rec)
	for _, rc := range recs {
		steps = append(steps, rc.Command+" "+rc.conf(t)["tag"].(string))
	}
	assert.Equal(t, []string{"ADD first", "ADD second", "ADD third", "DEL second", "DEL first"}, steps)
	for _, rc := range recs[3:] {
		prev := rc.conf(t)["prevResult"].(map[string]any)
		assert.Len(t, prev["interfaces"], 3, "DEL gets the last result: lo, rec-eth0 twice")
	}
	assert.False(t, loUp(t, ctr), "loopback was undone too")
	assert.Empty(t, cacheFiles(t, r.CacheDir))

	// The runtime's DEL after the failed ADD finds nothing left and succeeds.
	require.NoError(t, r.Del(context.Background(), n, att))
}

// TestChainPluginDelGoesOnAfterAFailingChild: DEL is best effort; the children before
// a failing one still release what they hold, and the failure is reported.
func TestChainPluginDelGoesOnAfterAFailingChild(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, chainOf("1.1.0", "n", "", `{"type":"loopback"}`,
		recorderConf(rec, `"fail":{"DEL":{"code":11,"msg":"lease server unreachable"}}`)))
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	require.NoError(t, err)
	require.True(t, loUp(t, ctr))

	err = r.Del(context.Background(), n, att)
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err))
	assert.ErrorContains(t, err, "chain: recorder: lease server unreachable")
	assert.False(t, loUp(t, ctr), "loopback's DEL ran after the recorder's failed")
	assert.Len(t, cacheFiles(t, r.CacheDir), 1, "the runtime keeps its cache entry to DEL again")
}

func TestChainPluginHonoursDisableCheckAndDisableGC(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	fail := recorderConf(rec, `"fail":{"CHECK":{"code":11,"msg":"no"},"GC":{"code":11,"msg":"no"}}`)
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	for _, tc := range []struct {
		extra string
		off   bool
	}{{``, false}, {`,"disableCheck":true,"disableGC":"true"`, true}} {
		n := parse(t, `{"cniVersion":"1.1.0","name":"n","plugins":[{"type":"chain"`+tc.extra+`,"plugins":[`+fail+`]}]}`)
		_, err := r.Add(context.Background(), n, att)
		require.NoError(t, err)
		checkErr, gcErr := r.Check(context.Background(), n, att), r.GC(context.Background(), n, &chain.GCArgs{})
		if tc.off {
			assert.NoError(t, checkErr)
			assert.NoError(t, gcErr)
		} else {
			assert.ErrorContains(t, checkErr, "chain: recorder: no")
			assert.ErrorContains(t, gcErr, "chain: recorder: no")
		}
	}
	var cmds []string
	for _, rc := range readRecords(t, rec) {
		cmds = append(cmds, rc.Command)
	}
	// GC's cache part DELs the attachment, which is in neither valid list.
	assert.Equal(t, []string{"ADD", "CHECK", "DEL", "GC", "ADD", "DEL"}, cmds)
}

func TestChainPluginSendsGCAndStatusToEveryChild(t *testing.T) {
	testns.RequireRoot(t)
	rec := filepath.Join(t.TempDir(), "rec")
	r := newRunner(t, pluginDir(t))
	conf := chainOf("1.1.0", "n", "", recorderConf(rec, `"tag":"a"`),
		recorderConf(rec, `"tag":"b"`, `"fail":{"STATUS":{"code":50,"msg":"no addresses left"}}`), recorderConf(rec, `"tag":"c"`))
	n := parse(t, conf)

	valid := []chain.Attachment{{ContainerID: "c1", IfName: "eth0"}}
	require.NoError(t, ours{t: t, r: r}.gc(conf, valid))
	err := r.Status(context.Background(), n)
	assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err))
	assert.ErrorContains(t, err, "chain: recorder: no addresses left")

	var got []string
	for _, rc := range readRecords(t, rec) {
		c := rc.conf(t)
		got = append(got, rc.Command+" "+c["tag"].(string))
		if rc.Command == "GC" {
			want := []any{map[string]any{"containerID": "c1", "ifname": "eth0"}}
			assert.Equal(t, want, c["cni.dev/valid-attachments"])
			assert.Equal(t, want, c["cni.dev/attachments"])
		}
	}
	assert.Equal(t, []string{"GC a", "GC b", "GC c", "STATUS a", "STATUS b"}, got)
}

// TestChainPluginRefusesACapabilityOnlyAChildDeclares: the runtime passes runtime config
// only for what the chain plugin itself declares, so a child's own capability would
// silently get nothing. ADD refuses it; DEL, which must not block on config, does not.
func TestChainPluginRefusesACapabilityOnlyAChildDeclares(t *testing.T) {
	ctr, rec, r := recordingRunner(t)
	n := parse(t, chainOf("1.1.0", "n", `,"capabilities":{"portMappings":true}`,
		recorderConf(rec, `"capabilities":{"portMappings":true,"bandwidth":true,"mac":false}`)))
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0"}
	_, err := r.Add(context.Background(), n, att)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.ErrorContains(t, err, `chain: capabilities: the children use bandwidth but the chain does not declare it`)
	assert.Empty(t, readRecords(t, rec), "no child ran")
	assert.NoError(t, r.Del(context.Background(), n, att))

	// A runtimeConfig written into the chain's own config reaches the children whatever
	// the chain declares (libcni leaves it in place).
	n = parse(t, chainOf("1.1.0", "n", `,"runtimeConfig":{"bandwidth":{"ingressRate":1}}`,
		recorderConf(rec, `"capabilities":{"bandwidth":true}`)))
	_, err = r.Add(context.Background(), n, att)
	require.NoError(t, err)
	recs := readRecords(t, rec)
	require.Len(t, recs, 2, "the DEL above, this ADD")
	assert.Equal(t, map[string]any{"bandwidth": map[string]any{"ingressRate": 1.0}}, recs[1].conf(t)["runtimeConfig"])
}
