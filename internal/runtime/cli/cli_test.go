package cli_test

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/runtime/cli"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestContainerIDIsCnitools(t *testing.T) {
	sum := sha512.Sum512([]byte("/run/netns/x"))
	assert.Equal(t, fmt.Sprintf("cnitool-%x", sum[:10]), cli.ContainerID("/run/netns/x"))
	assert.Len(t, cli.ContainerID("/run/netns/x"), len("cnitool-")+20)
}

func TestParseCNIArgs(t *testing.T) {
	cases := []struct {
		in   string
		want [][2]string
		err  string
	}{
		{"", nil, ""},
		{"A=1", [][2]string{{"A", "1"}}, ""},
		{"IgnoreUnknown=1;K8S_POD_NAME=p", [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAME", "p"}}, ""},
		{"A=", nil, `invalid CNI_ARGS pair "A="`},
		{"=1", nil, `invalid CNI_ARGS pair "=1"`},
		{"A=1=2", nil, "invalid CNI_ARGS pair"},
		{"A=1;", nil, `invalid CNI_ARGS pair ""`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := cli.ParseCNIArgs(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// env is a cni command environment: a conf dir, a cache dir and a plugin dir, each in
// the test's temp dirs.
type env struct {
	bin, confDir, cacheDir, pluginDir string
	host                              *testns.NS
	// extra variables of every command's environment
	extra []string
}

func newEnv(t *testing.T) *env {
	testns.RequireRoot(t)
	e := &env{bin: testns.Binary(t), confDir: t.TempDir(), cacheDir: t.TempDir(), pluginDir: t.TempDir(), host: testns.New(t)}
	return e
}

func (e *env) conf(t *testing.T, file, content string) {
	require.NoError(t, os.WriteFile(filepath.Join(e.confDir, file), []byte(content), 0o644))
}

type run struct {
	code           int
	stdout, stderr string
}

// cni runs the binary in the test's host namespace with cnitool's variables set.
func (e *env) cni(t *testing.T, stdin string, args ...string) run {
	t.Helper()
	env := append(os.Environ(), "NETCONFPATH="+e.confDir, "CNI_PATH="+e.pluginDir, "CNI_CACHE_DIR="+e.cacheDir)
	o := pt.RunCommand(t, e.host, append(env, e.extra...), []byte(stdin), e.bin, args...)
	return run{code: o.Exit, stdout: o.Stdout, stderr: o.Stderr}
}

func loUp(t *testing.T, n *testns.NS) bool {
	lo, err := n.Handle(t).LinkByName("lo")
	require.NoError(t, err)
	return lo.Attrs().Flags&1 != 0
}

func TestAddCheckDelThroughTheBinary(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)

	r := e.cni(t, "", "add", "lo", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, "1.1.0", res["cniVersion"])
	assert.Contains(t, r.stdout, "\n    \"interfaces\"", "indented like cnitool")
	assert.True(t, loUp(t, ctr))
	cacheFile := filepath.Join(e.cacheDir, "results", "lo-"+cli.ContainerID(ctr.Path)+"-eth0")
	assert.FileExists(t, cacheFile)

	r = e.cni(t, "", "check", "lo", ctr.Path)
	assert.Equal(t, run{}, r)

	r = e.cni(t, "", "del", "--ifname", "eth0", "lo", ctr.Path, "--timeout=10s")
	assert.Equal(t, run{}, r, "flags before and after the arguments")
	assert.False(t, loUp(t, ctr))
	assert.NoFileExists(t, cacheFile)

	r = e.cni(t, "", "check", "lo", ctr.Path)
	assert.Equal(t, 1, r.code, "CHECK after DEL fails")
	assert.Equal(t, `cni check: no attachment of network "lo" for container `+cli.ContainerID(ctr.Path)+
		", interface eth0: nothing in the result cache (never added, or deleted since) (CNI error code 3)\n", r.stderr)
	assert.Equal(t, run{}, e.cni(t, "", "del", "lo", ctr.Path), "a second DEL succeeds")
}

// TestCheckOfWhatWasNeverAddedSaysThereIsNoAttachment: `cni check` of an attachment
// nothing added names the attachment it did not find, rather than passing a CHECK
// without prevResult to the plugins, whose answer spoke of what they found in the
// container ("loopback interface is down"); the container's namespace is not touched.
func TestCheckOfWhatWasNeverAddedSaysThereIsNoAttachment(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)
	r := e.cni(t, "", "check", "--ifname", "net1", "--container-id", "never-added", "lo", ctr.Path)
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, `cni check: no attachment of network "lo" for container never-added, interface net1: `+
		"nothing in the result cache (never added, or deleted since) (CNI error code 3)\n", r.stderr)
	assert.False(t, loUp(t, ctr), "the container is left as it was")
}

// A node with flannel's manifest and ours holds two configs of cbr0: the runtime uses
// the first, and so does the CLI, saying that the other is not used.
func TestANetworkDefinedTwiceIsTheFirstFilesWithAWarning(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	e.conf(t, "20-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"no-such-plugin"}]}`)
	ctr := testns.New(t)
	for _, cmd := range []string{"add", "check", "del"} {
		r := e.cni(t, "", cmd, "lo", ctr.Path)
		require.Equal(t, 0, r.code, "%s: %s", cmd, r.stderr)
		assert.Equal(t, "cni "+cmd+": warning: "+filepath.Join(e.confDir, "20-lo.conflist")+` also defines network "lo"; `+
			filepath.Join(e.confDir, "10-lo.conflist")+" comes first and is used, as runtimes use it\n", r.stderr)
	}
}

func TestChainCommandErrorsAndExitCodes(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	e.conf(t, "20-bad.conflist", `{"cniVersion":"1.1.0","name":"zz","plugins":[{"type":"nosuch"}]}`)
	e.conf(t, "30-status.conflist", `{"cniVersion":"1.0.0","name":"old","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown network", []string{"add", "nope", ctr.Path}, 1, `cni add: no net configuration with name "nope"`},
		{"missing netns", []string{"add", "lo"}, 2, "want NETWORK NETNS"},
		{"too many args", []string{"del", "lo", ctr.Path, "x"}, 2, "got 3 argument(s)"},
		{"unknown flag", []string{"check", "--bogus", "lo", ctr.Path}, 2, "flag provided but not defined: -bogus"},
		{"bad ifname", []string{"add", "lo", ctr.Path, "--ifname", "a/b"}, 1, "(CNI error code 4)"},
		{"missing plugin", []string{"add", "zz", ctr.Path}, 1, `plugin type="nosuch" name="zz" failed (add): failed to find plugin "nosuch"`},
		{"bad cap args", []string{"add", "lo", ctr.Path, "--cap-args", "[1]"}, 1, "capability args (CAP_ARGS): must be a JSON object"},
		{"bad cni args", []string{"add", "lo", ctr.Path, "--cni-args", "A"}, 1, `invalid CNI_ARGS pair "A"`},
		{"status of an old network", []string{"status", "old"}, 0, ""},
		{"gc bad valid flag", []string{"gc", "lo", "--valid", "x"}, 2, "want CONTAINERID:IFNAME"},
		{"help", []string{"add", "--help"}, 0, "Exit status: 0 success, 1 plugin, CNI or config error, 2 usage error."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.cni(t, "", tc.args...)
			assert.Equal(t, tc.code, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	assert.False(t, loUp(t, ctr), "no failed command touched the container")
	entries, _ := os.ReadDir(filepath.Join(e.cacheDir, "results"))
	assert.Empty(t, entries)
}

func TestGCAndStatusThroughTheBinary(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr1, ctr2 := testns.New(t), testns.New(t)
	for _, c := range []*testns.NS{ctr1, ctr2} {
		require.Equal(t, 0, e.cni(t, "", "add", "lo", c.Path).code)
	}
	r := e.cni(t, "", "gc", "lo", "--valid", cli.ContainerID(ctr1.Path)+":eth0")
	assert.Equal(t, run{}, r)
	assert.True(t, loUp(t, ctr1))
	assert.False(t, loUp(t, ctr2), "the stale attachment was deleted")
	assert.Equal(t, []string{"lo-" + cli.ContainerID(ctr1.Path) + "-eth0"}, pt.Entries(t, filepath.Join(e.cacheDir, "results")),
		"only the valid attachment keeps its cache entry")
	assert.Equal(t, run{}, e.cni(t, "", "status", "lo", ctr1.Path))
	assert.Equal(t, run{}, e.cni(t, "", "gc", "lo", ctr1.Path), "cnitool's form: everything is stale")
	assert.False(t, loUp(t, ctr1))
	assert.Empty(t, pt.Entries(t, filepath.Join(e.cacheDir, "results")))
}

func TestListShowsNetworksAndTheirPlugins(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-a.conflist", `{"cniVersion":"1.1.0","name":"a","plugins":[{"type":"loopback"},{"type":"bandwidth"}]}`)
	e.conf(t, "20-b.conf", `{"cniVersion":"0.4.0","name":"b","type":"ptp"}`)
	r := e.cni(t, "", "ls")
	assert.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"NETWORK", "VERSION", "PLUGINS", "FILE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"a", "1.1.0", "loopback,bandwidth", filepath.Join(e.confDir, "10-a.conflist")}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"b", "0.4.0", "ptp", filepath.Join(e.confDir, "20-b.conf")}, strings.Fields(lines[2]))

	e.conf(t, "30-c.conflist", `{"name":"c","plugins":[{}]}`)
	r = e.cni(t, "", "ls")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "invalid: ")
}

func TestListShowsTheChildrenOfAChainPlugin(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-std.conflist", `{"cniVersion":"1.1.0","name":"std","plugins":[{"type":"chain",`+
		`"capabilities":{"portMappings":true},"plugins":[{"type":"loopback"},{"type":"bridge"},{"type":"portmap"}]},{"type":"tuning"}]}`)
	e.conf(t, "20-single.conf", `{"cniVersion":"1.0.0","name":"single","type":"chain","plugins":[{"type":"ptp"},{"type":"bandwidth"}]}`)
	r := e.cni(t, "", "ls")
	assert.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"std", "1.1.0", "chain(loopback,bridge,portmap),tuning", filepath.Join(e.confDir, "10-std.conflist")}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"single", "1.0.0", "chain(ptp,bandwidth)", filepath.Join(e.confDir, "20-single.conf")}, strings.Fields(lines[2]))

	e.conf(t, "30-nested.conflist", `{"cniVersion":"1.1.0","name":"nested","plugins":[{"type":"loopback"},`+
		`{"type":"chain","plugins":[{"type":"bridge"},{"type":"chain","plugins":[{"type":"ptp"}]}]}]}`)
	r = e.cni(t, "", "ls")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "invalid: plugins[1]: chain: plugins[1].type: a chain cannot be nested in a chain")
}

func TestExecRunsOnePluginByHand(t *testing.T) {
	e := newEnv(t)
	ctr := testns.New(t)
	conf := `{"cniVersion":"1.0.0","name":"x","type":"loopback"}`

	r := e.cni(t, conf, "exec", "loopback", "ADD", "--netns", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, "1.0.0", res["cniVersion"])
	assert.True(t, loUp(t, ctr))

	file := filepath.Join(t.TempDir(), "conf.json")
	require.NoError(t, os.WriteFile(file, []byte(conf), 0o644))
	r = e.cni(t, "", "exec", "--conf", file, "loopback", "del", "--netns", ctr.Path, "--container-id", "c1")
	assert.Equal(t, run{}, r)
	assert.False(t, loUp(t, ctr))

	r = e.cni(t, "", "exec", "loopback", "VERSION")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, `"supportedVersions"`)

	r = e.cni(t, conf, "exec", "loopback", "CHECK", "--netns", ctr.Path)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `cni exec: plugin "loopback" failed (CHECK): loopback interface is down`)

	r = e.cni(t, conf, "exec", "loopback", "FROB")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `unknown command "FROB"`)

	r = e.cni(t, conf, "exec", "nosuch", "ADD", "--netns", ctr.Path)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `failed to find plugin "nosuch"`)
}

// TestShortIfnameFlagAsCnitool: `cni add -i eth1` names the interface as cnitool's -i
// does; the cache entry and the DEL find it under that name.
// CNI_IFNAME names the interface when -i does not, and set but empty means eth0, as
// cnitool has it since its cobra rewrite (upstream row C15).
func TestIfnameComesFromCNIIfnameAndAnEmptyOneIsEth0(t *testing.T) {
	for env, want := range map[string]string{"": "eth0", "net7": "net7"} {
		t.Run(want, func(t *testing.T) {
			t.Setenv("CNI_IFNAME", env)
			e := newEnv(t)
			e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
			ctr := testns.New(t)
			r := e.cni(t, "", "add", "lo", ctr.Path)
			require.Equal(t, 0, r.code, r.stderr)
			assert.FileExists(t, filepath.Join(e.cacheDir, "results", "lo-"+cli.ContainerID(ctr.Path)+"-"+want))
			assert.Equal(t, run{}, e.cni(t, "", "del", "lo", ctr.Path))
		})
	}
}

func TestShortIfnameFlagAsCnitool(t *testing.T) {
	e := newEnv(t)
	e.conf(t, "10-lo.conflist", `{"cniVersion":"1.1.0","name":"lo","plugins":[{"type":"loopback"}]}`)
	ctr := testns.New(t)
	r := e.cni(t, "", "add", "-i", "eth1", "lo", ctr.Path)
	require.Equal(t, 0, r.code, r.stderr)
	cacheFile := filepath.Join(e.cacheDir, "results", "lo-"+cli.ContainerID(ctr.Path)+"-eth1")
	assert.FileExists(t, cacheFile)
	assert.Equal(t, run{}, e.cni(t, "", "check", "lo", ctr.Path, "-i", "eth1"))
	assert.Equal(t, run{}, e.cni(t, "", "del", "-i", "eth1", "lo", ctr.Path))
	assert.NoFileExists(t, cacheFile)
}
