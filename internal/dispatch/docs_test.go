package dispatch

import (
	"encoding"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/ipam/static"
	"github.com/cnikit/cni/internal/plugins/bandwidth"
	"github.com/cnikit/cni/internal/plugins/bridge"
	"github.com/cnikit/cni/internal/plugins/firewall"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/plugins/hostdevice"
	"github.com/cnikit/cni/internal/plugins/ipvlan"
	"github.com/cnikit/cni/internal/plugins/macvlan"
	"github.com/cnikit/cni/internal/plugins/portmap"
	"github.com/cnikit/cni/internal/plugins/ptp"
	"github.com/cnikit/cni/internal/plugins/sbr"
	"github.com/cnikit/cni/internal/plugins/tap"
	"github.com/cnikit/cni/internal/plugins/tuning"
	"github.com/cnikit/cni/internal/plugins/vlan"
	"github.com/cnikit/cni/internal/plugins/vrf"
)

// repoRoot is where README.md and docs/ are, seen from this package's directory.
const repoRoot = "../.."

// docKeys says where a plugin's config keys come from: the types its config is decoded
// into (every JSON key found by reflection, nested ones included), and the keys it
// reads outside them (ipam and dns from the spec's common keys, or a config decoded by
// hand).
type docKeys struct {
	types []reflect.Type
	extra []string
}

// The keys the main plugins read from the spec's common part (skel.NetConf): the IPAM
// object they delegate and the dns they report.
var ipamAndDNS = []string{"ipam", "dns"}

// pluginKeys maps every plugin of the registry to its config. A plugin added to the
// registry without a line here fails TestEveryConfigKeyIsNamedInItsPluginsPage.
var pluginKeys = map[string]docKeys{
	"host-local": {types: types[hostlocal.NetConf]()},
	"static":     {types: types[static.NetConf]()},
	"dhcp":       {types: types[dhcpconf.NetConf]()},
	// loopback has no keys of its own.
	"loopback":  {},
	"bandwidth": {types: types[bandwidth.Config]()},
	"bridge":    {types: types[bridge.Config](), extra: ipamAndDNS},
	"ptp":       {types: types[ptp.Config](), extra: ipamAndDNS},
	"portmap":   {types: types[portmap.Config]()},
	"tuning":    {types: types[tuning.Config]()},
	"firewall":  {types: types[firewall.Config]()},
	"sbr":       {types: types[sbr.Config]()},
	"vrf":       {types: types[vrf.Config]()},
	"flannel":   {types: types[flannel.Config]()},
	"macvlan":   {types: types[macvlan.Config](), extra: ipamAndDNS},
	"ipvlan":    {types: types[ipvlan.Config](), extra: ipamAndDNS},
	"vlan":      {types: types[vlan.Config](), extra: ipamAndDNS},
	// dummy has no keys beyond the common ones.
	"dummy":       {extra: ipamAndDNS},
	"host-device": {types: types[hostdevice.Config](), extra: ipamAndDNS},
	"tap":         {types: types[tap.Config](), extra: ipamAndDNS},
	// chain reads its keys by hand (internal/chain/nested.go): the list, libcni's two
	// list switches, and each child's type and capabilities. A key added there must be
	// added here too.
	"chain": {extra: []string{"plugins", "disableCheck", "disableGC", "type", "capabilities"}},
}

func types[T any]() []reflect.Type { return []reflect.Type{reflect.TypeFor[T]()} }

func TestEveryPluginHasADocPageAndAReadmeRow(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	table := pluginTable(string(readme))
	require.NotEmpty(t, table, "README.md: no plugin table (a table whose header starts with | plugin |)")
	for _, p := range Registry() {
		row := regexp.MustCompile("(?m)^\\|\\s*\\[?`" + regexp.QuoteMeta(p.Name) + "`")
		assert.True(t, row.MatchString(table), "README.md: no row for %q in the plugin table", p.Name)
		assert.FileExists(t, pagePath(p.Name))
	}
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "plugins", "*.md"))
	require.NoError(t, err)
	for _, page := range pages {
		name := strings.TrimSuffix(filepath.Base(page), ".md")
		assert.NotNil(t, Lookup(name), "%s: no plugin %q in the registry", page, name)
	}
}

func TestEveryConfigKeyIsNamedInItsPluginsPage(t *testing.T) {
	var names []string
	for _, p := range Registry() {
		names = append(names, p.Name)
		keys, ok := pluginKeys[p.Name]
		if !assert.True(t, ok, "plugin %q: no entry in pluginKeys", p.Name) {
			continue
		}
		data, err := os.ReadFile(pagePath(p.Name))
		if !assert.NoError(t, err) {
			continue
		}
		for _, path := range undocumented(string(data), keys) {
			t.Errorf("docs/plugins/%s.md does not name config key %s (in a code span)", p.Name, path)
		}
	}
	for name := range pluginKeys {
		assert.Contains(t, names, name, "pluginKeys: %q is no plugin of the registry", name)
	}
}

// TestTestsNamedInPluginPagesExist keeps the pages' evidence honest: every test a page
// cites is a test function of this repository.
func TestTestsNamedInPluginPagesExist(t *testing.T) {
	defined := testFuncs(t)
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "plugins", "*.md"))
	require.NoError(t, err)
	cited := regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)
	for _, page := range pages {
		data, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, name := range cited.FindAllString(string(data), -1) {
			assert.True(t, defined[name], "%s cites %s, which no _test.go defines", filepath.Base(page), name)
		}
	}
}

// TestUndocumentedFindsEveryKindOfKey shows that the check fails when a key is not
// named: keys of embedded, nested, pointer, slice and map-element structs are all
// found, as encoding/json would decode them.
func TestUndocumentedFindsEveryKindOfKey(t *testing.T) {
	type inner struct {
		Leaf string `json:"leaf"`
	}
	type Embedded struct {
		Promoted bool `json:"promoted"`
	}
	type sample struct {
		Embedded
		Plain    string            `json:"plain,omitempty"`
		Untagged int               // a key all the same, by its Go name
		Skipped  string            `json:"-"`
		hidden   string            // unexported: json never sets it
		Nested   struct{ X inner } `json:"nested"`
		Pointer  *inner            `json:"pointer"`
		List     []inner           `json:"list"`
		Map      map[string]*inner `json:"map"`
		Number   json.Number       `json:"number"`
	}
	_ = sample{}.hidden
	keys := docKeys{types: types[sample](), extra: []string{"extra"}}
	assert.Equal(t, []string{"Untagged", "extra", "list", "list[].leaf", "map", "map{}.leaf", "nested", "nested.X",
		"nested.X.leaf", "number", "plain", "pointer", "pointer.leaf", "promoted"}, sortedPaths(t, keys))

	page := "`promoted`, `plain`, `Untagged`, `nested.X`, `pointer`, `list`, `map`, `number`; leaf\n" +
		"```json\n{\"extra\": 1}\n```\n"
	assert.Equal(t, []string{"list[].leaf", "map{}.leaf", "nested.X.leaf", "pointer.leaf"}, undocumented(page, keys),
		"a key named only outside a code span, or not at all, is undocumented")
	assert.Contains(t, undocumented("promoted", keys), "promoted", "outside a code span a key is not named")
	assert.Contains(t, undocumented("`unpromoted`", keys), "promoted", "a key is named as a whole word only")
}

// pluginTable returns README's plugin table: the lines from its header row on, up to
// the first line that is no table row (a blank line ends a markdown table).
func pluginTable(readme string) string {
	var rows []string
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case rows == nil && strings.HasPrefix(line, "| plugin |"):
			rows = append(rows, line)
		case rows != nil && strings.HasPrefix(line, "|"):
			rows = append(rows, line)
		case rows != nil:
			return strings.Join(rows, "\n")
		}
	}
	return strings.Join(rows, "\n")
}

func pagePath(name string) string { return filepath.Join(repoRoot, "docs", "plugins", name+".md") }

// undocumented returns the paths of the keys that no code span of page names.
func undocumented(page string, keys docKeys) []string {
	spans := codeSpans(page)
	var missing []string
	for path, key := range configKeys(keys) {
		word := regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(key) + `($|[^A-Za-z0-9_])`)
		if !slices.ContainsFunc(spans, word.MatchString) {
			missing = append(missing, path)
		}
	}
	sort.Strings(missing)
	return missing
}

// codeSpans returns the text of the page's fenced code blocks and inline code spans.
func codeSpans(page string) []string {
	var spans []string
	fence := regexp.MustCompile("(?ms)^\\s*```[^\\n]*\\n(.*?)^\\s*```")
	for _, m := range fence.FindAllStringSubmatch(page, -1) {
		spans = append(spans, m[1])
	}
	rest := fence.ReplaceAllString(page, "")
	for _, m := range regexp.MustCompile("`+([^`]+)`+").FindAllStringSubmatch(rest, -1) {
		spans = append(spans, m[1])
	}
	return spans
}

// configKeys maps the path of every key of keys (runtimeConfig.portMappings[].hostPort)
// to the key itself (hostPort), which is what a page must name.
func configKeys(keys docKeys) map[string]string {
	out := map[string]string{}
	for _, k := range keys.extra {
		out[k] = k
	}
	for _, t := range keys.types {
		walkKeys(t, "", map[reflect.Type]bool{}, out)
	}
	return out
}

// specLists are keys whose entries the spec defines (GC's attachment lists): a page names
// the key, and need not spell out the spec's fields of each entry.
var specLists = map[string]bool{"cni.dev/valid-attachments": true, "cni.dev/attachments": true}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walkKeys adds the keys of struct type t, the value of the key at path, as
// encoding/json decodes them: exported fields by their tag's name or else their Go name,
// "-" skipped, the fields of untagged embedded structs promoted, and the keys of structs
// reached through pointers, slices, arrays and map values nested below their field. A
// type that decodes itself is one value, not keys.
func walkKeys(t reflect.Type, path string, onPath map[reflect.Type]bool, out map[string]string) {
	t, step := elem(t)
	if t.Kind() != reflect.Struct || decodesItself(t) || onPath[t] {
		return
	}
	onPath[t] = true
	defer delete(onPath, t)
	base := path + step
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			if ft, _ := elem(f.Type); ft.Kind() == reflect.Struct {
				walkKeys(f.Type, base, onPath, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		full := name
		if base != "" {
			full = base + "." + name
		}
		out[full] = name
		if !specLists[name] {
			walkKeys(f.Type, full, onPath, out)
		}
	}
}

// elem follows pointers, slices, arrays and maps to the type of the values a key holds,
// and says how a path shows the step: "[]" for a list, "{}" for a map.
func elem(t reflect.Type) (reflect.Type, string) {
	step := ""
	for {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			t, step = t.Elem(), step+"[]"
		case reflect.Map:
			t, step = t.Elem(), step+"{}"
		default:
			return t, step
		}
	}
}

func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

func sortedPaths(t *testing.T, keys docKeys) []string {
	t.Helper()
	var paths []string
	for p := range configKeys(keys) {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// testFuncs returns the names of the test functions defined anywhere in the repository.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	def := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
	out := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range def.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	require.NoError(t, err)
	return out
}
