package dispatch

import (
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/chain"
)

// standardConflist is the standard node chain the repository ships, relative to its root:
// the file README.md's install command and the docs' install examples name.
const standardConflist = "deploy/net.d/10-std.conflist"

// TestFilesTheDocsInstallExist: a path that an install command in the docs' code hands
// over as a file (cni's --conf, --one-exec and --conf-dir, kubectl's -f) is a file of the
// repository, so the command works as written from the root of a fresh clone. Absolute
// paths are the node's or the image's, placeholders (FILE, <dir>) the reader's; a bin/
// path is a build output and must be a target of the Makefile.
func TestFilesTheDocsInstallExist(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := makeTargets(string(makefile))
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, file := range installedFiles(string(data)) {
			if strings.HasPrefix(file, "bin/") {
				assert.True(t, targets[file], "%s: a command takes %s, which no Makefile target builds", page, file)
				continue
			}
			_, err := os.Stat(filepath.Join(repoRoot, file))
			assert.NoError(t, err, "%s: a command takes %s, which a clone of the repository does not have", page, file)
		}
	}
}

// TestTheStandardChainInTheDocsIsTheShippedConflist: the standard chain that chain.md
// shows (as the conflist and as the one chain plugin `cni install --one-exec` makes of
// it) and containerd.md shows is, as JSON, the file the repository ships; and that file
// loads as the runner loads a config dir, holds only built-in plugins, and is what a
// runtime takes: cniVersion 1.0.0 (containerd 1.6 knows no 1.1.0) and no loopback (the
// runtime brings lo up itself).
func TestTheStandardChainInTheDocsIsTheShippedConflist(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join(repoRoot, standardConflist))
	require.NoError(t, err, "the standard chain the docs install")
	n, err := chain.Load(filepath.Join(repoRoot, path.Dir(standardConflist)), "std")
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", n.CNIVersion, "containerd 1.6 fails every pod of a 1.1.0 config")
	assert.NotContains(t, n.Types(), "loopback", "go-cni and CRI-O run a loopback network of their own")
	for _, typ := range append(n.Types(), ipamTypes(t, n)...) {
		assert.NotNil(t, Lookup(typ), "%s names %q, which is not built into cni", standardConflist, typ)
	}
	oneExec, err := chain.WrapList(shipped, func(typ string) bool { return Lookup(typ) != nil })
	require.NoError(t, err)

	for page, want := range map[string][][]byte{
		"docs/plugins/chain.md": {shipped, oneExec},
		"docs/containerd.md":    {shipped},
	} {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		shown := conflistBlocks(t, page, string(data))
		require.Len(t, shown, len(want), "%s: the conflists it shows", page)
		for i := range want {
			assert.Equal(t, jsonValue(t, want[i]), shown[i], "%s: conflist %d is not %s", page, i+1, standardConflist)
		}
	}
}

// TestTheDocChecksFindWhatTheyLookFor shows the two checks' parsers at work: the files of
// install commands in blocks and spans, and the conflists among a page's JSON blocks.
func TestTheDocChecksFindWhatTheyLookFor(t *testing.T) {
	page := "```sh\n" +
		"bin/cni install --dir /opt/cni/bin --conf std.conflist --conf-dir /etc/cni/net.d  # --conf not.this\n" +
		"/cni install --one-exec=deploy/a.conflist --conf /etc/cni-install/10-cni.conflist\n" +
		"cni install [--conf FILE]... [--one-exec FILE]... --conf -\n" +
		"cni ls --conf-dir \\\n  deploy/net.d\n" +
		"kubectl apply -f deploy/kubernetes/cni.yaml && nft -f rules.nft\n" +
		"cni log -f --otlp\n" +
		"```\n" +
		"Prose: `kubectl delete -f\ndeploy/kubernetes/x.yaml` and --conf prose.conflist, `cni install --conf <file>`.\n"
	assert.Equal(t, []string{"std.conflist", "deploy/a.conflist", "deploy/net.d", "deploy/kubernetes/cni.yaml",
		"deploy/kubernetes/x.yaml"}, installedFiles(page))

	blocks := conflistBlocks(t, "page.md", "```json\n{\"name\":\"a\",\"plugins\":[{\"type\":\"x\"}]}\n```\n"+
		"```json\n{\"type\":\"bridge\"}\n```\n```sh\n{\"plugins\":[]}\n```\n")
	assert.Equal(t, []any{map[string]any{"name": "a", "plugins": []any{map[string]any{"type": "x"}}}}, blocks)
}

var (
	// jsonBlock is a fenced block marked as JSON; its group is the text inside.
	jsonBlock = regexp.MustCompile("(?ms)^\\s*```json[ \\t]*\\n(.*?)^\\s*```[ \\t]*$")
	// literalPath is a relative or absolute path as written, without shell syntax or a
	// placeholder's marks, and not "-" (standard input).
	literalPath = regexp.MustCompile(`^[A-Za-z0-9_./][A-Za-z0-9_./-]*$`)
	placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// fileFlags are, per command, the flags whose value is a file or directory the command
// reads.
var fileFlags = map[string][]string{
	"cni":     {"--conf", "--one-exec", "--conf-dir"},
	"kubectl": {"-f", "--filename"},
}

// installedFiles returns the relative paths that the commands in the page's code (fenced
// blocks and code spans) read as files, as written: absolute paths and placeholders are
// left out.
func installedFiles(page string) []string {
	var out []string
	for _, line := range codeLines(page) {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		var flags []string
		for i, w := range words {
			if f, ok := fileFlags[path.Base(w)]; ok {
				flags = f
				continue
			}
			if w == "&&" || w == "|" || w == ";" {
				flags = nil
			}
			for _, flag := range flags {
				value, ok := strings.CutPrefix(w, flag+"=")
				if !ok && w == flag && i+1 < len(words) {
					value, ok = words[i+1], true
				}
				if ok && literalPath.MatchString(value) && !placeholder.MatchString(value) && !path.IsAbs(value) {
					out = append(out, value)
				}
			}
		}
	}
	return out
}

// codeLines returns the lines of the page's fenced blocks, a line continued with a
// backslash joined to the next, and its code spans, each as one line.
func codeLines(page string) []string {
	var out []string
	for _, block := range fencedBlock.FindAllString(page, -1) {
		block = strings.ReplaceAll(block, "\\\n", " ")
		out = append(out, strings.Split(block, "\n")...)
	}
	for _, span := range codeSpan.FindAllString(fencedBlock.ReplaceAllString(page, ""), -1) {
		out = append(out, strings.ReplaceAll(strings.Trim(span, "`"), "\n", " "))
	}
	return out
}

// conflistBlocks returns, decoded, the JSON blocks of the page that are configuration
// lists (objects with "plugins"), in order.
func conflistBlocks(t *testing.T, page, text string) []any {
	t.Helper()
	var out []any
	for _, m := range jsonBlock.FindAllStringSubmatch(text, -1) {
		var list map[string]any
		require.NoError(t, json.Unmarshal([]byte(m[1]), &list), "%s: a json block that is not JSON:\n%s", page, m[1])
		if _, ok := list["plugins"]; ok {
			out = append(out, any(list))
		}
	}
	return out
}

// jsonValue decodes data for comparing as JSON: key order and spacing do not count.
func jsonValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(data, &v))
	return v
}

// ipamTypes returns the IPAM types the network's plugins delegate to.
func ipamTypes(t *testing.T, n *chain.Network) []string {
	t.Helper()
	var out []string
	for _, p := range n.Plugins {
		var conf struct {
			IPAM struct {
				Type string `json:"type"`
			} `json:"ipam"`
		}
		require.NoError(t, json.Unmarshal(p.Bytes, &conf))
		if conf.IPAM.Type != "" {
			out = append(out, conf.IPAM.Type)
		}
	}
	return out
}
