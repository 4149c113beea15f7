package skel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
)

// recorder is a plugin whose callbacks record the request they got.
type recorder struct {
	got  *Request
	fail error
	res  *result.Result
	boom bool
}

func (r *recorder) plugin(versions ...string) *Plugin {
	if len(versions) == 0 {
		versions = version.All()
	}
	cb := func(req *Request) error {
		r.got = req
		if r.boom {
			panic("kaboom")
		}
		return r.fail
	}
	return &Plugin{
		Name: "rec", About: "records calls", Versions: versions,
		Add: func(req *Request) (*result.Result, error) {
			if err := cb(req); err != nil {
				return nil, err
			}
			return r.res, nil
		},
		Del: cb, Check: cb, GC: cb, Status: cb,
	}
}

func env(cmd string, extra ...string) []string {
	base := []string{"CNI_COMMAND=" + cmd, "CNI_CONTAINERID=abc", "CNI_NETNS=/var/run/netns/nope",
		"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "HOME=/root"}
	return append(base, extra...)
}

func without(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

type run struct {
	code           int
	stdout, stderr string
}

func runPlugin(p *Plugin, env []string, stdin string) run {
	var out, errb bytes.Buffer
	code := Run(p, env, strings.NewReader(stdin), &out, &errb)
	return run{code, out.String(), errb.String()}
}

func decodeError(t *testing.T, s string) cnierror.Error {
	t.Helper()
	var e cnierror.Error
	require.NoError(t, json.Unmarshal([]byte(s), &e), "stdout must be a CNI error: %q", s)
	return e
}

const conf = `{"cniVersion":"1.0.0","name":"net1","type":"rec"}`

func TestRequiredEnvPerCommandReportsAllMissingAtOnce(t *testing.T) {
	cases := []struct {
		cmd     string
		drop    []string
		missing string
	}{
		{"ADD", []string{"CNI_NETNS", "CNI_PATH"}, "[CNI_NETNS,CNI_PATH]"},
		{"ADD", []string{"CNI_CONTAINERID"}, "[CNI_CONTAINERID]"},
		{"CHECK", []string{"CNI_IFNAME"}, "[CNI_IFNAME]"},
		{"DEL", []string{"CNI_CONTAINERID", "CNI_IFNAME", "CNI_PATH"}, "[CNI_CONTAINERID,CNI_IFNAME,CNI_PATH]"},
		{"GC", []string{"CNI_PATH"}, "[CNI_PATH]"},
		{"STATUS", []string{"CNI_PATH"}, "[CNI_PATH]"},
	}
	for _, c := range cases {
		t.Run(c.cmd+c.missing, func(t *testing.T) {
			e := env(c.cmd)
			for _, d := range c.drop {
				e = without(e, d)
			}
			r := runPlugin((&recorder{}).plugin(), e, `{"cniVersion":"1.1.0","name":"n"}`)
			assert.Equal(t, 1, r.code)
			got := decodeError(t, r.stdout)
			assert.Equal(t, cnierror.CodeInvalidEnv, got.Code)
			assert.Equal(t, "required env variables "+c.missing+" missing", got.Msg)
		})
	}
}

func TestDelNeedsNoNetnsAndReachesThePlugin(t *testing.T) {
	rec := &recorder{}
	r := runPlugin(rec.plugin(), without(env("DEL"), "CNI_NETNS"), conf)
	assert.Equal(t, 0, r.code, r.stdout)
	require.NotNil(t, rec.got)
	assert.Empty(t, rec.got.Args.Netns)
	assert.Empty(t, r.stdout, "DEL prints nothing on success")
}

func TestGCAndStatusNeedOnlyPath(t *testing.T) {
	for _, cmd := range []string{"GC", "STATUS"} {
		rec := &recorder{}
		e := []string{"CNI_COMMAND=" + cmd, "CNI_PATH=/x"}
		r := runPlugin(rec.plugin(), e, `{"cniVersion":"1.1.0","name":"n"}`)
		assert.Equal(t, 0, r.code, cmd+": "+r.stdout)
		assert.NotNil(t, rec.got, cmd)
	}
}

func TestUnknownCommandIsCode4(t *testing.T) {
	r := runPlugin((&recorder{}).plugin(), env("FROB"), conf)
	assert.Equal(t, 1, r.code)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInvalidEnv, e.Code)
	assert.Contains(t, e.Msg, "unknown CNI_COMMAND: FROB")
}

func TestContainerIDAndIfNameRules(t *testing.T) {
	cases := []struct {
		name string
		kv   string
		ok   bool
	}{
		{"plain id", "CNI_CONTAINERID=abc-1.2_x", true},
		{"id starting with dash", "CNI_CONTAINERID=-abc", false},
		{"id with slash", "CNI_CONTAINERID=a/b", false},
		{"id with space", "CNI_CONTAINERID=a b", false},
		{"ifname 15 bytes", "CNI_IFNAME=abcdefghijklmno", true},
		{"ifname 16 bytes", "CNI_IFNAME=abcdefghijklmnop", false},
		{"ifname dot", "CNI_IFNAME=.", false},
		{"ifname dotdot", "CNI_IFNAME=..", false},
		{"ifname slash", "CNI_IFNAME=a/b", false},
		{"ifname colon", "CNI_IFNAME=a:b", false},
		{"ifname tab", "CNI_IFNAME=a\tb", false},
		{"ifname unicode space", "CNI_IFNAME=a\u00a0b", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, _, _ := strings.Cut(c.kv, "=")
			for _, cmd := range []string{"ADD", "CHECK"} {
				rec := &recorder{res: &result.Result{CNIVersion: "1.0.0"}}
				r := runPlugin(rec.plugin(), append(without(env(cmd), k), c.kv), conf)
				if c.ok {
					assert.Equal(t, 0, r.code, "%s: %s", cmd, r.stdout)
					continue
				}
				assert.Equal(t, 1, r.code, cmd)
				e := decodeError(t, r.stdout)
				assert.Equal(t, cnierror.CodeInvalidEnv, e.Code, cmd)
				assert.Contains(t, e.Msg, map[string]string{"CNI_CONTAINERID": "containerID", "CNI_IFNAME": "CNI_IFNAME"}[k],
					"%s: the error names the variable", cmd)
				assert.Nil(t, rec.got, "%s: the plugin is not called", cmd)
			}
		})
	}
}

// TestDelOfWhatNoAddCanHaveMadeSucceedsWithoutCallingThePlugin: a container id against
// the spec's rule or an interface name the kernel refuses is what no ADD, ours or the
// reference's, can have attached, so DEL has nothing to delete: it succeeds (it was
// code 4, so such a DEL failed for ever, as the reference's does), says why on stderr,
// and calls no plugin. A name with a control character, which ADD refuses but the
// kernel and libcni take, is still refused (see TestKernelIfNameRuleTakesControlCharacters).
func TestDelOfWhatNoAddCanHaveMadeSucceedsWithoutCallingThePlugin(t *testing.T) {
	for _, kv := range []string{"CNI_CONTAINERID=-abc", "CNI_CONTAINERID=a/b", "CNI_IFNAME=abcdefghijklmnop",
		"CNI_IFNAME=.", "CNI_IFNAME=..", "CNI_IFNAME=a/b", "CNI_IFNAME=a:b", "CNI_IFNAME=a\tb", "CNI_IFNAME=a\u00a0b"} {
		t.Run(kv, func(t *testing.T) {
			k, _, _ := strings.Cut(kv, "=")
			rec := &recorder{}
			r := runPlugin(rec.plugin(), append(without(env("DEL"), k), kv), conf)
			assert.Equal(t, 0, r.code, r.stdout)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "rec: DEL: nothing to delete, no ADD can have made this attachment")
			assert.Nil(t, rec.got, "the plugin is not called")
		})
	}
	for _, kv := range []string{"CNI_IFNAME=e\x7f", "CNI_IFNAME=e\x01"} {
		rec := &recorder{}
		r := runPlugin(rec.plugin(), append(without(env("DEL"), "CNI_IFNAME"), kv), conf)
		assert.Equal(t, 1, r.code, "%q", kv)
		assert.Equal(t, cnierror.CodeInvalidEnv, decodeError(t, r.stdout).Code, "%q", kv)
	}
}

func TestNetworkNameRules(t *testing.T) {
	for _, name := range []string{"", "-bad", "a b", "a/b", "../x"} {
		c := `{"cniVersion":"1.0.0","name":` + mustJSON(name) + `}`
		r := runPlugin((&recorder{}).plugin(), env("DEL"), c)
		assert.Equal(t, 1, r.code, name)
		assert.Equal(t, cnierror.CodeInvalidConfig, decodeError(t, r.stdout).Code, name)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestVersionNegotiation(t *testing.T) {
	cases := []struct {
		name     string
		cmd      string
		conf     string
		versions []string
		code     uint
	}{
		{"supported", "DEL", `{"cniVersion":"0.4.0","name":"n"}`, nil, 0},
		{"missing cniVersion means 0.1.0", "DEL", `{"name":"n"}`, []string{"0.1.0"}, 0},
		{"missing cniVersion refused by newer plugin", "ADD", `{"name":"n"}`, []string{"1.0.0"}, 1},
		{"unsupported", "ADD", `{"cniVersion":"0.3.1","name":"n"}`, []string{"1.0.0", "1.1.0"}, 1},
		{"future version", "ADD", `{"cniVersion":"2.0.0","name":"n"}`, nil, 1},
		{"unparseable version", "DEL", `{"cniVersion":"one","name":"n"}`, nil, 6},
		{"CHECK needs 0.4.0", "CHECK", `{"cniVersion":"0.3.1","name":"n"}`, nil, 1},
		{"CHECK on 0.4.0", "CHECK", `{"cniVersion":"0.4.0","name":"n"}`, nil, 0},
		{"GC needs 1.1.0", "GC", `{"cniVersion":"1.0.0","name":"n"}`, nil, 1},
		{"STATUS needs 1.1.0", "STATUS", `{"cniVersion":"1.0.0","name":"n"}`, nil, 1},
		{"bad JSON", "DEL", `{"cniVersion":`, nil, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runPlugin((&recorder{}).plugin(c.versions...), env(c.cmd), c.conf)
			if c.code == 0 {
				assert.Equal(t, 0, r.code, r.stdout)
				return
			}
			assert.Equal(t, 1, r.code)
			assert.Equal(t, c.code, decodeError(t, r.stdout).Code, r.stdout)
		})
	}
}

// TestDelAndGCOfAVersionThePluginDoesNotSupportSucceedDoingNothing: no ADD with such a
// config can have run the plugin, so its DEL and GC have nothing to undo; refused (as
// the reference refuses them), they failed for ever, and under libcni a refused DEL
// also kept the earlier plugins of the list from deleting theirs. ADD and CHECK keep
// refusing it with code 1, and a GC below 1.1.0 (a command the version lacks) too.
func TestDelAndGCOfAVersionThePluginDoesNotSupportSucceedDoingNothing(t *testing.T) {
	for _, c := range []struct {
		name, cmd, conf string
		code            uint
	}{
		{"DEL", "DEL", `{"cniVersion":"0.3.1","name":"n"}`, 0},
		{"DEL of a missing cniVersion", "DEL", `{"name":"n"}`, 0},
		{"DEL of a future version", "DEL", `{"cniVersion":"2.0.0","name":"n"}`, 0},
		{"GC", "GC", `{"cniVersion":"1.1.0","name":"n"}`, 0},
		{"ADD", "ADD", `{"cniVersion":"0.3.1","name":"n"}`, 1},
		{"CHECK", "CHECK", `{"cniVersion":"0.4.0","name":"n"}`, 1},
		{"GC below 1.1.0", "GC", `{"cniVersion":"0.4.0","name":"n"}`, 1},
		{"DEL of an unparseable version", "DEL", `{"cniVersion":"one","name":"n"}`, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			versions := []string{"1.0.0"}
			if c.name == "GC below 1.1.0" {
				versions = []string{"0.4.0", "1.1.0"}
			}
			r := runPlugin(rec.plugin(versions...), env(c.cmd), c.conf)
			assert.Nil(t, rec.got, "the callback never runs")
			if c.code != 0 {
				assert.Equal(t, 1, r.code)
				assert.Equal(t, c.code, decodeError(t, r.stdout).Code, r.stdout)
				return
			}
			assert.Equal(t, 0, r.code, r.stdout)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "rec: "+c.cmd+": nothing to do, no ADD with this config can have run: incompatible CNI versions")
		})
	}
}

// TestAMistypedCommonKeyIsCode7ButDelGoesOn: a key every config shares given the wrong
// JSON type ("ipam": "x") was code 6 for every command, DEL included, which then failed
// for ever although the ADD of that config had made nothing. ADD, CHECK, GC and STATUS
// refuse it with code 7 naming the key; DEL runs with the key left empty (an empty ipam
// type releases nothing) and the keys that decoded. Bad JSON stays code 6 for all.
func TestAMistypedCommonKeyIsCode7ButDelGoesOn(t *testing.T) {
	for _, tc := range []struct{ key, value, want string }{
		{"ipam", `"x"`, "rec: ipam: must be an object, got a JSON string"},
		{"ipam", `["host-local"]`, "rec: ipam: must be an object, got a JSON array"},
		{"ipam", `{"type":7}`, "rec: ipam.type: must be a string, got a JSON number"},
		{"dns", `"8.8.8.8"`, "rec: dns: must be an object, got a JSON string"},
		{"capabilities", `["portMappings"]`, "rec: capabilities: must be an object, got a JSON array"},
	} {
		config := `{"cniVersion":"1.1.0","name":"net1","type":"rec","` + tc.key + `":` + tc.value + `}`
		for _, cmd := range []string{"ADD", "CHECK", "GC", "STATUS"} {
			t.Run(tc.key+tc.value+" "+cmd, func(t *testing.T) {
				rec := &recorder{}
				r := runPlugin(rec.plugin(), env(cmd), config)
				assert.Equal(t, 1, r.code)
				e := decodeError(t, r.stdout)
				assert.Equal(t, cnierror.CodeInvalidConfig, e.Code, r.stdout)
				assert.Equal(t, tc.want, e.Msg)
				assert.Nil(t, rec.got, "the callback never runs")
			})
		}
		t.Run(tc.key+tc.value+" DEL", func(t *testing.T) {
			rec := &recorder{}
			r := runPlugin(rec.plugin(), env("DEL"), config)
			assert.Equal(t, 0, r.code, r.stdout)
			require.NotNil(t, rec.got, "DEL runs")
			assert.Equal(t, "net1", rec.got.Net.Name, "the keys that decoded are there")
			assert.Empty(t, rec.got.Net.IPAM.Type)
		})
	}
	r := runPlugin((&recorder{}).plugin(), env("DEL"), `{"cniVersion":"1.1.0","name":"net1","ipam":`)
	assert.Equal(t, cnierror.CodeDecode, decodeError(t, r.stdout).Code, "bad JSON is code 6, DEL too")
}

func TestIncompatibleVersionDetailsListSupported(t *testing.T) {
	r := runPlugin((&recorder{}).plugin("1.0.0", "1.1.0"), env("ADD"), `{"cniVersion":"0.3.1","name":"n"}`)
	e := decodeError(t, r.stdout)
	assert.Equal(t, `config is "0.3.1", plugin supports ["1.0.0" "1.1.0"]`, e.Details)
	assert.Equal(t, "0.3.1", e.CNIVersion)
}

func TestVersionPrintsWithoutReadingStdin(t *testing.T) {
	var out bytes.Buffer
	code := Run((&recorder{}).plugin("0.4.0", "1.0.0"), []string{"CNI_COMMAND=VERSION"},
		iotest.ErrReader(errors.New("stdin must not be read")), &out, io.Discard)
	assert.Equal(t, 0, code)
	assert.JSONEq(t, `{"cniVersion":"1.1.0","supportedVersions":["0.4.0","1.0.0"]}`, out.String())
}

func TestNoCommandPrintsAboutOnStderr(t *testing.T) {
	r := runPlugin((&recorder{}).plugin("1.0.0"), []string{"PATH=/bin"}, "")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "rec: records calls")
	assert.Contains(t, r.stderr, "CNI protocol versions supported: 1.0.0")
}

func TestStdinReadFailureIsCode5(t *testing.T) {
	var out bytes.Buffer
	code := Run((&recorder{}).plugin(), env("DEL"), iotest.ErrReader(errors.New("broken pipe")), &out, io.Discard)
	assert.Equal(t, 1, code)
	assert.Equal(t, cnierror.CodeIO, decodeError(t, out.String()).Code)
}

func TestUntypedErrorIsCode999AndTypedKeepsCode(t *testing.T) {
	r := runPlugin((&recorder{fail: errors.New("plain failure")}).plugin(), env("DEL"), conf)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInternal, e.Code)
	assert.Equal(t, "plain failure", e.Msg)

	typed := cnierror.New(cnierror.CodeTryAgainLater, "busy")
	r = runPlugin((&recorder{fail: typed}).plugin(), env("DEL"), conf)
	assert.Equal(t, cnierror.CodeTryAgainLater, decodeError(t, r.stdout).Code)
}

func TestPanicBecomesErrorJSONNotAStackTrace(t *testing.T) {
	r := runPlugin((&recorder{boom: true}).plugin(), env("DEL"), conf)
	assertPanicReported(t, r, "kaboom")
}

// assertPanicReported checks what a run that panicked gives a runtime: exit 1, an
// internal-error CNI error on stdout whose message holds msg, and the stack on stderr
// only, for the operator.
func assertPanicReported(t *testing.T, r run, msg string) {
	t.Helper()
	assert.Equal(t, 1, r.code)
	e := decodeError(t, r.stdout)
	assert.Equal(t, cnierror.CodeInternal, e.Code)
	assert.Contains(t, e.Msg, msg)
	assert.NotContains(t, r.stdout, "goroutine")
	assert.Contains(t, r.stderr, "goroutine", "the stack goes to stderr for the operator")
}

func TestNilGCAndStatusSucceed(t *testing.T) {
	p := &Plugin{Name: "x", Versions: version.All()}
	for _, cmd := range []string{"GC", "STATUS"} {
		r := runPlugin(p, env(cmd), `{"cniVersion":"1.1.0","name":"n"}`)
		assert.Equal(t, 0, r.code, cmd)
	}
}

func TestGCReceivesValidAttachmentsAndLegacyKey(t *testing.T) {
	for _, key := range []string{"cni.dev/valid-attachments", "cni.dev/attachments"} {
		rec := &recorder{}
		c := `{"cniVersion":"1.1.0","name":"n","` + key + `":[{"containerID":"c1","ifname":"eth0"}]}`
		r := runPlugin(rec.plugin(), env("GC"), c)
		require.Equal(t, 0, r.code, r.stdout)
		assert.Equal(t, []Attachment{{ContainerID: "c1", IfName: "eth0"}}, rec.got.ValidAttachments, key)
	}
}

// An empty new key with a non-empty legacy one keeps the legacy list: GC must not
// collect attachments the config still names as valid.
func TestGCWithAnEmptyValidListKeepsTheLegacyList(t *testing.T) {
	rec := &recorder{}
	c := `{"cniVersion":"1.1.0","name":"n","cni.dev/valid-attachments":[],"cni.dev/attachments":[{"containerID":"c1","ifname":"eth0"}]}`
	r := runPlugin(rec.plugin(), env("GC"), c)
	require.Equal(t, 0, r.code, r.stdout)
	assert.Equal(t, []Attachment{{ContainerID: "c1", IfName: "eth0"}}, rec.got.ValidAttachments)
}

func TestAddPrintsResultInConfigVersion(t *testing.T) {
	res, err := result.Parse([]byte(`{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/24","gateway":"10.0.0.1"}]}`), "")
	require.NoError(t, err)
	rec := &recorder{res: res}
	r := runPlugin(rec.plugin(), env("ADD"), `{"cniVersion":"0.4.0","name":"n"}`)
	require.Equal(t, 0, r.code, r.stdout)
	assert.JSONEq(t, `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24","gateway":"10.0.0.1"}],"dns":{}}`, r.stdout)
}

func TestPrevResultIsConvertedToConfigVersion(t *testing.T) {
	rec := &recorder{}
	c := `{"cniVersion":"0.3.1","name":"n","prevResult":{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/24"}]}}`
	r := runPlugin(rec.plugin(), env("DEL"), c)
	require.Equal(t, 0, r.code, r.stdout)
	require.NotNil(t, rec.got.PrevResult)
	assert.Equal(t, "0.3.1", rec.got.PrevResult.CNIVersion)
	assert.Equal(t, "10.0.0.2/24", rec.got.PrevResult.IPs[0].Address.String())
}

func TestPrevResultWithoutVersionTakesConfigVersion(t *testing.T) {
	rec := &recorder{}
	c := `{"cniVersion":"1.0.0","name":"n","prevResult":{"ips":[{"address":"10.0.0.2/24"}]}}`
	r := runPlugin(rec.plugin(), env("DEL"), c)
	require.Equal(t, 0, r.code, r.stdout)
	assert.Equal(t, "1.0.0", rec.got.PrevResult.CNIVersion)
}

func TestPrevResultOfAnotherVersionFamilyIsRefused(t *testing.T) {
	c := `{"cniVersion":"1.0.0","name":"n","prevResult":{"cniVersion":"0.4.0","ips":[]}}`
	r := runPlugin((&recorder{}).plugin(), env("DEL"), c)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, cnierror.CodeIncompatibleVersion, decodeError(t, r.stdout).Code)
}

func TestAddRefusesThePluginsOwnNetns(t *testing.T) {
	e := append(without(env("ADD"), "CNI_NETNS"), "CNI_NETNS=/proc/thread-self/ns/net")
	r := runPlugin((&recorder{res: &result.Result{CNIVersion: "1.0.0"}}).plugin(), e, conf)
	assert.Equal(t, 1, r.code)
	assert.Equal(t, cnierror.CodeInvalidNetNS, decodeError(t, r.stdout).Code)

	r = runPlugin((&recorder{res: &result.Result{CNIVersion: "1.0.0"}}).plugin(),
		append(e, "CNI_NETNS_OVERRIDE=1"), conf)
	assert.Equal(t, 0, r.code, r.stdout)
}

func TestInvokeReturnsTypedErrorsAndResults(t *testing.T) {
	args := ArgsFromEnv(env("ADD"))
	_, err := Invoke(t.Context(), (&recorder{}).plugin("1.1.0"), args, []byte(`{"cniVersion":"0.4.0","name":"n"}`), nil)
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeIncompatibleVersion, cnierror.Code(err))

	res := &result.Result{CNIVersion: "1.1.0"}
	got, err := Invoke(t.Context(), (&recorder{res: res}).plugin(), args, []byte(conf), nil)
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", got.CNIVersion)

	args.Command = "CHECK"
	args.IfName = "bad/name"
	_, err = Invoke(t.Context(), (&recorder{}).plugin(), args, []byte(conf), nil)
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.Code(err))
}

func TestErrorCarriesConfigVersion(t *testing.T) {
	r := runPlugin((&recorder{fail: errors.New("x")}).plugin(), env("DEL"), conf)
	assert.Equal(t, "1.0.0", decodeError(t, r.stdout).CNIVersion)
}

func TestParseCNIArgs(t *testing.T) {
	cases := []struct {
		raw   string
		known []string
		want  map[string]string
		err   bool
	}{
		{"", nil, map[string]string{}, false},
		{"IP=10.0.0.2", []string{"IP"}, map[string]string{"IP": "10.0.0.2"}, false},
		{"IP=10.0.0.2;K8S_POD_NAME=x", []string{"IP"}, nil, true},
		{"IgnoreUnknown=1;IP=10.0.0.2;K8S_POD_NAME=x", []string{"IP"},
			map[string]string{"IgnoreUnknown": "1", "IP": "10.0.0.2", "K8S_POD_NAME": "x"}, false},
		{"IgnoreUnknown=true;A=b", nil, map[string]string{"IgnoreUnknown": "true", "A": "b"}, false},
		{"IP", []string{"IP"}, nil, true},
		{"IP=a=b", []string{"IP"}, nil, true},
	}
	for _, c := range cases {
		got, err := ParseCNIArgs(c.raw, c.known...)
		if c.err {
			assert.Error(t, err, c.raw)
			assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.Code(err), c.raw)
			continue
		}
		require.NoError(t, err, c.raw)
		assert.Equal(t, c.want, got, c.raw)
	}
}

func TestCNIPathIsAList(t *testing.T) {
	a := ArgsFromEnv([]string{"CNI_PATH=/a:/b::/c"})
	assert.Equal(t, []string{"/a", "/b", "", "/c"}, a.Path)
}

func TestEnvironReplacesOnlyCNIVariables(t *testing.T) {
	a := ArgsFromEnv(env("ADD", "CNI_ARGS=IP=1.2.3.4"))
	got := a.Environ("DEL")
	assert.Contains(t, got, "HOME=/root")
	assert.Contains(t, got, "CNI_COMMAND=DEL")
	assert.Contains(t, got, "CNI_ARGS=IP=1.2.3.4")
	assert.NotContains(t, got, "CNI_COMMAND=ADD")
}

type typedConf struct {
	MTU      int    `json:"mtu"`
	Backend  string `json:"backend"`
	Hairpin  *bool  `json:"hairpinMode"`
	Mappings []struct {
		Port uint16 `json:"hostPort"`
	} `json:"portMappings"`
	Labels map[string]string `json:"labels"`
}

// The message is in the config's words: the key as written in JSON and the JSON kind
// wanted, never Go's "Go struct field typedConf.backend of type string".
func TestLoadConfigNamesTheBadField(t *testing.T) {
	for raw, want := range map[string]string{
		`{"mtu":"big"}`:                         `bridge: mtu: must be a whole number, got a JSON string`,
		`{"mtu":1.5}`:                           `bridge: mtu: must be a whole number, got a JSON number 1.5`,
		`{"backend":1}`:                         `bridge: backend: must be a string, got a JSON number`,
		`{"hairpinMode":"yes"}`:                 `bridge: hairpinMode: must be true or false, got a JSON string`,
		`{"portMappings":{}}`:                   `bridge: portMappings: must be a list, got a JSON object`,
		`{"portMappings":[{"hostPort":70000}]}`: `bridge: portMappings.hostPort: must be a whole number from 0 to 65535, got a JSON number 70000`,
		`{"labels":{"a":1}}`:                    `bridge: labels: must be a string, got a JSON number`,
	} {
		req := &Request{Config: []byte(raw), Net: NetConf{Type: "bridge"}}
		_, err := LoadConfig[typedConf](req)
		require.Error(t, err, raw)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), raw)
		assert.Equal(t, want, err.Error(), raw)
	}
	req := &Request{Config: []byte(`{"mtu":`), Net: NetConf{Type: "bridge"}}
	_, err := LoadConfig[typedConf](req)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "JSON that is no JSON")
	assert.Contains(t, err.Error(), "bridge: invalid network config")
}

func TestValidIDMatchesTheSpecPattern(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "0": true, "a-b_c.d": true, "A9": true,
		"": false, "-a": false, "_a": false, ".a": false, "a b": false, "a/b": false, "ä": false, "a:b": false,
	} {
		assert.Equal(t, ok, validID(id), id)
	}
}

func TestDNSConfigBecomesTheResultDNS(t *testing.T) {
	var none *DNS
	assert.True(t, none.Result().IsEmpty())
	d := &DNS{Nameservers: []string{"10.0.0.53"}, Domain: "example.org", Search: []string{"a"}, Options: []string{"ndots:1"}}
	assert.Equal(t, result.DNS{Nameservers: d.Nameservers, Domain: d.Domain, Search: d.Search, Options: d.Options}, d.Result())
}
