package dispatch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

type outcome struct {
	code           int
	stdout, stderr string
}

func run(args []string, env []string, stdin string) outcome {
	var out, errb bytes.Buffer
	code := Main(Process{Args: args, Env: env, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return outcome{code, out.String(), errb.String()}
}

func TestListPrintsEveryRegisteredNameOnce(t *testing.T) {
	o := run([]string{"/usr/bin/cni", "--list"}, nil, "")
	require.Equal(t, 0, o.code)
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		assert.False(t, seen[l], "duplicate %q", l)
		seen[l] = true
		assert.NotNil(t, Lookup(l))
	}
	assert.Len(t, lines, len(Registry()))
	assert.True(t, seen["loopback"])
}

// TestRegistryNamesAreTheirPluginsNames: the registry finds a plugin by the name on its
// line without making every plugin's entry; that name must be the one the entry says.
func TestRegistryNamesAreTheirPluginsNames(t *testing.T) {
	for _, b := range builtins() {
		p := b.plugin()
		require.NotNil(t, p, b.name)
		assert.Equal(t, b.name, p.Name, "the registry's line for %q makes plugin %q", b.name, p.Name)
	}
}

func TestRegistryEntriesAreComplete(t *testing.T) {
	for _, p := range Registry() {
		assert.NotEmpty(t, p.Name)
		assert.NotEmpty(t, p.About, p.Name)
		assert.NotEmpty(t, p.Versions, p.Name)
		assert.NotNil(t, p.Add, p.Name)
		assert.NotNil(t, p.Del, p.Name)
		assert.NotNil(t, p.Check, p.Name)
	}
}

func TestPluginNameDispatchesOnArgv0Basename(t *testing.T) {
	o := run([]string{"/opt/cni/bin/loopback"}, []string{"CNI_COMMAND=VERSION"}, "")
	require.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, `"supportedVersions"`)
}

func TestSubcommandFormRunsThePlugin(t *testing.T) {
	o := run([]string{"cni", "loopback"}, []string{"CNI_COMMAND=VERSION"}, "")
	require.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, `"cniVersion":"1.1.0"`)
}

func TestPrefixedLinkNameFindsThePlugin(t *testing.T) {
	o := run([]string{"/x/buildkit-cni-loopback"}, []string{"CNI_COMMAND=VERSION"}, "")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, "supportedVersions")
}

func TestUnknownNameWithCommandIsCNIErrorAndFailure(t *testing.T) {
	for _, args := range [][]string{{"/opt/cni/bin/nosuch"}, {"cni", "nosuch"}, {"cni"}} {
		o := run(args, []string{"CNI_COMMAND=ADD"}, "{}")
		assert.Equal(t, 1, o.code, args)
		var e cnierror.Error
		require.NoError(t, json.Unmarshal([]byte(o.stdout), &e), "stdout %q", o.stdout)
		assert.Equal(t, cnierror.CodeInvalidEnv, e.Code)
		assert.NotEmpty(t, e.Msg)
	}
}

func TestUnknownNameWithoutCommandPrintsHelpAndFails(t *testing.T) {
	o := run([]string{"/opt/cni/bin/nosuch"}, nil, "")
	assert.Equal(t, 1, o.code)
	assert.Empty(t, o.stdout)
	assert.Contains(t, o.stderr, "no plugin named \"nosuch\"")
}

func TestPluginWithoutCommandPrintsAboutAndSucceeds(t *testing.T) {
	o := run([]string{"loopback"}, nil, "")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stderr, "loopback:")
	assert.Contains(t, o.stderr, "CNI protocol versions supported")
}

func TestVersionAndHelp(t *testing.T) {
	o := run([]string{"cni", "version"}, nil, "")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, "cni dev")
	assert.Contains(t, o.stdout, "go: go1.")
	assert.Contains(t, o.stdout, "1.1.0")

	o = run([]string{"cni", "help"}, nil, "")
	assert.Equal(t, 0, o.code)
	for _, p := range Registry() {
		assert.Contains(t, o.stdout, p.Name)
	}
}

func TestRenamedBinaryStillAnswersSubcommands(t *testing.T) {
	o := run([]string{"/usr/local/bin/cni-v1.2", "--list"}, nil, "")
	assert.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, "loopback")
	o = run([]string{"/usr/local/bin/cni-v1.2", "--list"}, []string{"CNI_COMMAND=ADD"}, "")
	assert.Equal(t, 1, o.code, "a runtime call under an unknown name still fails")
}

func TestPluginSubcommandRunsUnderBothNames(t *testing.T) {
	for _, args := range [][]string{
		{"/opt/cni/bin/dhcp", "daemon", "-no-such-flag"},
		{"/usr/bin/cni", "dhcp", "daemon", "-no-such-flag"},
	} {
		o := run(args, nil, "")
		assert.Equal(t, 2, o.code, "%v", args)
		assert.Contains(t, o.stderr, "flag provided but not defined: -no-such-flag", "%v", args)
		assert.Contains(t, o.stderr, "-socketpath", "the daemon's usage")
	}
}

func TestRuntimeCallIsNeverTakenForASubcommand(t *testing.T) {
	o := run([]string{"/opt/cni/bin/dhcp", "daemon"}, []string{"CNI_COMMAND=VERSION"}, "")
	require.Equal(t, 0, o.code)
	assert.Contains(t, o.stdout, `"supportedVersions"`)
}
