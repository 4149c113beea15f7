package chain_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
)

func TestVersionNegotiationMatchesLibcni(t *testing.T) {
	cases := []struct {
		name, keys, want string
	}{
		{"lone version", `"cniVersion":"1.0.0"`, "1.0.0"},
		{"lone version above ours is used as written", `"cniVersion":"2.0.0"`, "2.0.0"},
		{"highest of both", `"cniVersion":"0.3.1","cniVersions":["0.4.0","1.0.0"]`, "1.0.0"},
		{"list entries above 1.1.0 skipped", `"cniVersion":"1.0.0","cniVersions":["1.1.0","1.2.0"]`, "1.1.0"},
		{"only newer versions fall back to cniVersion", `"cniVersion":"3.0.0","cniVersions":["2.0.0"]`, "3.0.0"},
		{"list without cniVersion", `"cniVersions":["0.4.0","1.1.0","0.3.1"]`, "1.1.0"},
		{"no version at all", `"name":"x"`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := `{"name":"net",` + tc.keys + `,"plugins":[{"type":"loopback"}]}`
			ours := parse(t, conf)
			assert.Equal(t, tc.want, ours.CNIVersion)
			ref, err := libcni.NetworkConfFromBytes([]byte(conf))
			require.NoError(t, err)
			assert.Equal(t, ref.CNIVersion, ours.CNIVersion, "libcni agrees")
		})
	}
}

func TestBooleanKeysAcceptBoolsAndStrings(t *testing.T) {
	cases := []struct {
		value string
		want  bool
	}{{`true`, true}, {`false`, false}, {`"TRUE"`, true}, {`"False"`, false}}
	for _, tc := range cases {
		t.Run(tc.value, func(t *testing.T) {
			n := parse(t, `{"name":"n","cniVersion":"1.1.0","disableCheck":`+tc.value+`,"disableGC":`+tc.value+
				`,"plugins":[{"type":"loopback"}]}`)
			assert.Equal(t, tc.want, n.DisableCheck)
			assert.Equal(t, tc.want, n.DisableGC)
		})
	}
	_, err := chain.Parse([]byte(`{"name":"n","disableGC":"yes","plugins":[{"type":"loopback"}]}`))
	require.ErrorContains(t, err, `disableGC: must be true or false, got "yes"`)
}

func TestParseRejectsBadLists(t *testing.T) {
	cases := []struct {
		name, conf, msg string
	}{
		{"not json", `{"name":`, "parsing configuration list"},
		{"no name", `{"cniVersion":"1.0.0","plugins":[{"type":"loopback"}]}`, "no name"},
		{"bad name", `{"name":"a b","plugins":[{"type":"loopback"}]}`, "invalid characters"},
		{"name not a string", `{"name":3,"plugins":[{"type":"loopback"}]}`, "name: must be a string"},
		{"bad version", `{"name":"n","cniVersion":"1.x","plugins":[{"type":"loopback"}]}`, `cniVersion: invalid version "1.x"`},
		{"bad versions entry", `{"name":"n","cniVersions":["one"],"plugins":[{"type":"loopback"}]}`, "cniVersions[0]"},
		{"missing type", `{"name":"n","plugins":[{"type":"loopback"},{"ipMasq":true}]}`, "plugins[1]: plugin config: missing 'type'"},
		{"type is a path", `{"name":"n","plugins":[{"type":"../bin/x"}]}`, "must be a plugin name, not a path"},
		{"capabilities not bools", `{"name":"n","plugins":[{"type":"portmap","capabilities":{"portMappings":"yes"}}]}`, "plugins[0]"},
		{"empty plugin list", `{"name":"n","plugins":[]}`, "no plugins in list"},
		{"plugins not a list", `{"name":"n","plugins":{"type":"x"}}`, "plugins: must be a list"},
		{"no plugins at all", `{"name":"n","cniVersion":"1.0.0"}`, "no plugin configs found"},
		{"inline only without plugins", `{"name":"n","loadOnlyInlinedPlugins":true}`, "loadOnlyInlinedPlugins"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chain.Parse([]byte(tc.conf))
			var inv *chain.InvalidError
			require.ErrorAs(t, err, &inv)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestLoadFindsNetworksLikeLibcni(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "20-b.conflist"), `{"name":"b","cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}`)
	writeFile(t, filepath.Join(dir, "10-a.conflist"), `{"name":"a","cniVersion":"1.1.0","plugins":[{"type":"loopback"}]}`)
	writeFile(t, filepath.Join(dir, "30-legacy.conf"), `{"name":"legacy","cniVersion":"0.4.0","type":"ptp","mtu":1400}`)
	writeFile(t, filepath.Join(dir, "a", "50-extra.conf"), `{"type":"tuning"}`)
	writeFile(t, filepath.Join(dir, "a", "ignored.json"), `{"type":"nope"}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), `not a config`)

	for _, name := range []string{"a", "b", "legacy"} {
		t.Run(name, func(t *testing.T) {
			ours, err := chain.Load(dir, name)
			require.NoError(t, err)
			ref, err := libcni.LoadNetworkConf(dir, name)
			require.NoError(t, err)
			assert.Equal(t, ref.Name, ours.Name)
			assert.Equal(t, ref.CNIVersion, ours.CNIVersion)
			assert.JSONEq(t, string(ref.Bytes), string(ours.Bytes))
			var refTypes []string
			for _, p := range ref.Plugins {
				refTypes = append(refTypes, p.Network.Type)
				assert.JSONEq(t, string(p.Bytes), string(ours.Plugins[len(refTypes)-1].Bytes))
			}
			assert.Equal(t, refTypes, ours.Types())
		})
	}
}

func TestLoadOnlyInlinedPluginsSkipsDropins(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.conflist"), `{"name":"a","loadOnlyInlinedPlugins":"true","plugins":[{"type":"loopback"}]}`)
	writeFile(t, filepath.Join(dir, "a", "x.conf"), `{"type":"tuning"}`)
	n, err := chain.Load(dir, "a")
	require.NoError(t, err)
	assert.Equal(t, []string{"loopback"}, n.Types())
}

func TestLoadTakesPluginsFromDropinsAlone(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.conflist"), `{"name":"a","cniVersion":"1.1.0"}`)
	writeFile(t, filepath.Join(dir, "a", "2.conf"), `{"type":"second"}`)
	writeFile(t, filepath.Join(dir, "a", "1.conf"), `{"type":"first"}`)
	n, err := chain.Load(dir, "a")
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "second"}, n.Types())
}

func TestLoadErrors(t *testing.T) {
	type files map[string]string
	cases := []struct {
		name   string
		files  files
		target any
		msg    string
	}{
		{"empty dir", files{}, new(*chain.NoConfigsError), "no net configurations found"},
		{"unknown network", files{"a.conflist": `{"name":"a","plugins":[{"type":"x"}]}`}, new(*chain.NotFoundError),
			`no net configuration with name "want"`},
		{"unknown network among legacy files", files{"a.conf": `{"name":"a","type":"x"}`}, new(*chain.NotFoundError), "want"},
		{"broken file before the match aborts", files{
			"1.conflist": `{"name":`, "2.conflist": `{"name":"want","plugins":[{"type":"x"}]}`,
		}, new(*chain.InvalidError), "1.conflist"},
		{"bad dropin", files{
			"a.conflist": `{"name":"want","plugins":[{"type":"x"}]}`, "want/1.conf": `{"mtu":1}`,
		}, new(*chain.InvalidError), "missing 'type'"},
		{"no plugins inline nor as drop-ins", files{"a.conflist": `{"name":"want","cniVersion":"1.1.0"}`},
			new(*chain.InvalidError), "no plugin configs found"},
		{"only inlined plugins but none", files{"a.conflist": `{"name":"want","loadOnlyInlinedPlugins":true}`},
			new(*chain.InvalidError), "loadOnlyInlinedPlugins is true, and there is no 'plugins' key"},
		{"oversize file", files{
			"a.conflist": `{"name":"want","plugins":[{"type":"x","pad":"` + strings.Repeat("x", chain.MaxFileSize) + `"}]}`,
		}, new(*chain.InvalidError), "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			_, err := chain.Load(dir, "want")
			require.Error(t, err)
			assert.True(t, errors.As(err, tc.target), "error type %T: %v", err, err)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

// A network defined in two files is the first file's, as libcni and the runtimes take
// it: a node with flannel's manifest and ours holds 10-cni.conflist and
// 10-flannel.conflist, both of cbr0, and the runtime uses the first; a CHECK, DEL or GC
// that refused would leave the runtime's attachments unmanageable. The others are
// named, so that the CLI can say an edit to them has no effect.
func TestLoadTakesTheFirstFileOfANetworkAndNamesTheShadowedOnes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "10-cni.conflist"), `{"name":"cbr0","plugins":[{"type":"chain"}]}`)
	writeFile(t, filepath.Join(dir, "10-flannel.conflist"), `{"name":"cbr0","plugins":[{"type":"flannel"}]}`)
	writeFile(t, filepath.Join(dir, "20-other.conflist"), `{"name":"other","plugins":[{"type":"bridge"}]}`)
	writeFile(t, filepath.Join(dir, "99-old.conf"), `{"name":"cbr0","type":"bridge"}`)
	n, err := chain.Load(dir, "cbr0")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "10-cni.conflist"), n.File)
	assert.Equal(t, []string{"chain"}, n.Types())
	assert.Equal(t, []string{filepath.Join(dir, "10-flannel.conflist"), filepath.Join(dir, "99-old.conf")}, n.Shadowed)

	other, err := chain.Load(dir, "other")
	require.NoError(t, err)
	assert.Empty(t, other.Shadowed)
}

func TestLoadOfAMissingDirIsNoConfigs(t *testing.T) {
	_, err := chain.Load(filepath.Join(t.TempDir(), "absent"), "x")
	var nc *chain.NoConfigsError
	require.ErrorAs(t, err, &nc)
}

func TestListReportsEveryFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.conflist"), `{"name":"a","cniVersion":"1.1.0","plugins":[{"type":"loopback"},{"type":"bandwidth"}]}`)
	writeFile(t, filepath.Join(dir, "b.conflist"), `{"name":"b","plugins":[{}]}`)
	writeFile(t, filepath.Join(dir, "c.json"), `{"name":"c","cniVersion":"0.4.0","type":"ptp"}`)
	entries, err := chain.List(dir)
	require.NoError(t, err)
	require.Len(t, entries, 3)
	assert.Equal(t, []string{"loopback", "bandwidth"}, entries[0].Network.Types())
	assert.ErrorContains(t, entries[1].Err, "missing 'type'")
	assert.Equal(t, "c", entries[2].Network.Name)
	assert.Equal(t, "0.4.0", entries[2].Network.CNIVersion)
}
