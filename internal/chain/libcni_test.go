package chain_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// runtime is one implementation of the runtime side: our runner or libcni.
type runtime interface {
	add(conf string, att chain.Attachment) (string, error)
	check(conf string, att chain.Attachment) error
	del(conf string, att chain.Attachment) error
	gc(conf string, valid []chain.Attachment) error
	status(conf string) error
}

type ours struct {
	t testing.TB
	r *chain.Runner
}

func (o ours) add(conf string, att chain.Attachment) (string, error) {
	res, err := o.r.Add(context.Background(), parse(o.t, conf), att)
	if err != nil {
		return "", err
	}
	return string(mustJSON(o.t, res)), nil
}

func (o ours) check(conf string, att chain.Attachment) error {
	return o.r.Check(context.Background(), parse(o.t, conf), att)
}

func (o ours) del(conf string, att chain.Attachment) error {
	return o.r.Del(context.Background(), parse(o.t, conf), att)
}

func (o ours) gc(conf string, valid []chain.Attachment) error {
	args := &chain.GCArgs{}
	for _, v := range valid {
		args.ValidAttachments = append(args.ValidAttachments, skelAttachment(v))
	}
	return o.r.GC(context.Background(), parse(o.t, conf), args)
}

func (o ours) status(conf string) error { return o.r.Status(context.Background(), parse(o.t, conf)) }

type reference struct {
	t testing.TB
	c *libcni.CNIConfig
}

func newReference(t testing.TB, dir, cacheDir string) reference {
	return reference{t: t, c: libcni.NewCNIConfigWithCacheDir([]string{dir}, cacheDir, nil)}
}

func (l reference) list(conf string) *libcni.NetworkConfigList {
	n, err := libcni.NetworkConfFromBytes([]byte(conf))
	require.NoError(l.t, err)
	return n
}

func rtConf(att chain.Attachment) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: att.ContainerID, NetNS: att.Netns, IfName: att.IfName, Args: att.Args,
		CapabilityArgs: att.CapabilityArgs}
}

func (l reference) add(conf string, att chain.Attachment) (string, error) {
	res, err := l.c.AddNetworkList(context.Background(), l.list(conf), rtConf(att))
	if err != nil {
		return "", err
	}
	return string(mustJSON(l.t, res)), nil
}

func (l reference) check(conf string, att chain.Attachment) error {
	return l.c.CheckNetworkList(context.Background(), l.list(conf), rtConf(att))
}

func (l reference) del(conf string, att chain.Attachment) error {
	return l.c.DelNetworkList(context.Background(), l.list(conf), rtConf(att))
}

func (l reference) gc(conf string, valid []chain.Attachment) error {
	args := &libcni.GCArgs{}
	for _, v := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: v.ContainerID, IfName: v.IfName})
	}
	return l.c.GCNetworkList(context.Background(), l.list(conf), args)
}

func (l reference) status(conf string) error {
	return l.c.GetStatusNetworkList(context.Background(), l.list(conf))
}

// outcome is what a scenario observably did: results, errors, what the external plugin
// was sent, and the kernel state of each container.
type outcome struct {
	Steps   []string
	Records []record
}

// scenario runs ADD, CHECK, a second ADD, GC keeping the first, STATUS and DEL against
// two containers, noting everything observable. Paths that necessarily differ between
// two runs (netns, plugin dir, the recorder's file) are replaced by placeholders.
func scenario(t *testing.T, rt runtime, conf, rec, dir string) outcome {
	t.Helper()
	host := testns.New(t)
	ctr1, ctr2 := testns.New(t), testns.New(t)
	caps := map[string]any{"portMappings": []any{map[string]any{"hostPort": 8080.0, "containerPort": 80.0, "protocol": "tcp"}}}
	a1 := chain.Attachment{ContainerID: "c1", Netns: ctr1.Path, IfName: "eth0", Args: [][2]string{{"IgnoreUnknown", "1"}}, CapabilityArgs: caps}
	a2 := chain.Attachment{ContainerID: "c2", Netns: ctr2.Path, IfName: "eth1"}
	var steps []string
	note := func(what string, out string, err error) {
		s := what + ": " + out
		if err != nil {
			code := cnierror.Code(err)
			var te *types.Error
			if asTypesError(err, &te) {
				code = te.Code
			}
			s += fmt.Sprintf(" error code %d", code)
		}
		steps = append(steps, s)
	}
	state := func(what string) {
		steps = append(steps, fmt.Sprintf("%s: lo up %v %v", what, loUp(t, ctr1), loUp(t, ctr2)))
	}
	host.Run(t, func() error {
		out, err := rt.add(conf, a1)
		note("add c1", out, err)
		state("after add c1")
		note("check c1", "", rt.check(conf, a1))
		out, err = rt.add(conf, a2)
		note("add c2", out, err)
		note("gc keeping c1", "", rt.gc(conf, []chain.Attachment{a1}))
		state("after gc")
		note("status", "", rt.status(conf))
		note("del c1", "", rt.del(conf, a1))
		note("del c1 again", "", rt.del(conf, a1))
		state("after del")
		return nil
	})
	o := outcome{Steps: steps, Records: readRecords(t, rec)}
	replace := strings.NewReplacer(ctr1.Path, "NETNS1", ctr2.Path, "NETNS2", dir, "PLUGINDIR", rec, "REC")
	for i := range o.Steps {
		o.Steps[i] = replace.Replace(o.Steps[i])
	}
	for i := range o.Records {
		o.Records[i].Stdin = replace.Replace(o.Records[i].Stdin)
		for k, v := range o.Records[i].Env {
			o.Records[i].Env[k] = replace.Replace(v)
		}
	}
	return o
}

func TestSameScenarioGivesTheSameOutcomeAsLibcni(t *testing.T) {
	testns.RequireRoot(t)
	dir := pluginDir(t, "loopback")
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			outcomes := map[string]outcome{}
			for _, impl := range []string{"libcni", "ours"} {
				rec := filepath.Join(t.TempDir(), "rec")
				conf := `{"cniVersion":"` + v + `","name":"std","plugins":[{"type":"loopback"},` +
					recorderConf(rec, `"capabilities":{"portMappings":true}`) + `]}`
				var rt runtime = newReference(t, dir, t.TempDir())
				if impl == "ours" {
					rt = ours{t: t, r: newRunner(t, dir)}
				}
				outcomes[impl] = scenario(t, rt, conf, rec, dir)
			}
			assert.Equal(t, outcomes["libcni"].Steps, outcomes["ours"].Steps)
			require.Equal(t, len(outcomes["libcni"].Records), len(outcomes["ours"].Records))
			for i, want := range outcomes["libcni"].Records {
				got := outcomes["ours"].Records[i]
				assert.Equal(t, want.Command, got.Command)
				assert.Equal(t, want.Env, got.Env, "env of %s", want.Command)
				assert.Equal(t, want.Stdin, got.Stdin, "stdin of %s, byte for byte", want.Command)
			}
		})
	}
}

func TestCacheInteropWithLibcni(t *testing.T) {
	testns.RequireRoot(t)
	dir := pluginDir(t, "loopback")
	for _, tc := range []struct{ adder, other, id string }{
		{"ours", "libcni", "c1"}, {"libcni", "ours", "c1"},
		// 240 bytes: the cache entry's name is near the kernel's limit.
		{"ours", "libcni", pt.LongID(240)}, {"libcni", "ours", pt.LongID(240)},
	} {
		t.Run(fmt.Sprintf("%s adds, %s checks and deletes, %d-byte id", tc.adder, tc.other, len(tc.id)), func(t *testing.T) {
			host, ctr := testns.New(t), testns.New(t)
			rec := filepath.Join(t.TempDir(), "rec")
			conf := `{"cniVersion":"1.1.0","name":"interop","plugins":[{"type":"loopback"},` + recorderConf(rec) + `]}`
			cacheDir := t.TempDir()
			r := newRunner(t, dir)
			r.CacheDir = cacheDir
			impls := map[string]runtime{"ours": ours{t: t, r: r}, "libcni": newReference(t, dir, cacheDir)}
			att := chain.Attachment{ContainerID: tc.id, Netns: ctr.Path, IfName: "eth0", Args: [][2]string{{"IgnoreUnknown", "1"}}}
			host.Run(t, func() error {
				if _, err := impls[tc.adder].add(conf, att); err != nil {
					return err
				}
				if err := impls[tc.other].check(conf, att); err != nil {
					return err
				}
				return impls[tc.other].del(conf, att)
			})
			recs := readRecords(t, rec)
			require.Len(t, recs, 3)
			for _, rc := range recs[1:] {
				prev, ok := rc.conf(t)["prevResult"].(map[string]any)
				require.True(t, ok, "%s got the other implementation's cached result", rc.Command)
				assert.Len(t, prev["interfaces"], 2)
			}
			assert.False(t, loUp(t, ctr))
			assert.Empty(t, cacheFiles(t, cacheDir))
			assert.Empty(t, tmpFiles(t, cacheDir))
		})
	}
}

func TestLibcniReadsOurCacheEntry(t *testing.T) {
	testns.RequireRoot(t)
	ctr := testns.New(t)
	r := newRunner(t, t.TempDir())
	conf := `{"cniVersion":"1.0.0","name":"lo","plugins":[{"type":"loopback"}]}`
	att := chain.Attachment{ContainerID: "c1", Netns: ctr.Path, IfName: "eth0", Args: [][2]string{{"A", "B"}},
		CapabilityArgs: map[string]any{"portMappings": []any{}}}
	res, err := r.Add(context.Background(), parse(t, conf), att)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Del(context.Background(), parse(t, conf), att) })

	ref := libcni.NewCNIConfigWithCacheDir(nil, r.CacheDir, nil)
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	require.NoError(t, err)
	cached, err := ref.GetNetworkListCachedResult(list, rtConf(att))
	require.NoError(t, err)
	assert.JSONEq(t, string(mustJSON(t, res)), string(mustJSON(t, cached)))
	cfg, rt, err := ref.GetNetworkListCachedConfig(list, rtConf(chain.Attachment{ContainerID: "c1", IfName: "eth0"}))
	require.NoError(t, err)
	assert.Equal(t, conf, string(cfg))
	assert.Equal(t, att.Args, rt.Args)
	atts, err := ref.GetCachedAttachments("c1")
	require.NoError(t, err)
	require.Len(t, atts, 1)
	assert.Equal(t, ctr.Path, atts[0].NetNS)
}

func asTypesError(err error, target **types.Error) bool {
	for err != nil {
		if te, ok := err.(*types.Error); ok {
			*target = te
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

func skelAttachment(a chain.Attachment) skel.Attachment {
	return skel.Attachment{ContainerID: a.ContainerID, IfName: a.IfName}
}
