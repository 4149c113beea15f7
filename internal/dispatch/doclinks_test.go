package dispatch

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryRelativeLinkInTheDocsResolves keeps README.md, CONTRIBUTING.md and docs/
// walkable: every relative link names a file or directory of the repository, and a
// #fragment names a heading of the page it points to.
func TestEveryRelativeLinkInTheDocsResolves(t *testing.T) {
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, target := range relativeLinks(string(data)) {
			if problem := brokenLink(page, target); problem != "" {
				t.Errorf("%s: link %q: %s", page, target, problem)
			}
		}
	}
}

// TestDocsNameNoPathOutsideTheRepository: a reader has the repository, not the machine it
// was written on, so no page names a file beside it (../shared/...), in a link or not.
func TestDocsNameNoPathOutsideTheRepository(t *testing.T) {
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, path := range outsidePaths(page, string(data)) {
			t.Errorf("%s names %q, outside the repository", page, path)
		}
	}
}

// TestMakeTargetsNamedInTheDocsExist: a `make X` in a code span or block of the docs
// names a target of the Makefile.
func TestMakeTargetsNamedInTheDocsExist(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := makeTargets(string(makefile))
	require.Contains(t, targets, "test", "Makefile: no target found at all")
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, name := range makeInvocations(string(data)) {
			assert.True(t, targets[name], "%s: `make %s`, but the Makefile has no target %q", page, name, name)
		}
	}
}

// badNames are test names the docs give as what not to write.
var badNames = map[string]string{"TestDel2": "CONTRIBUTING.md: `TestDelTwiceSucceeds`, not `TestDel2`"}

// TestTestsNamedInTheDocsExist extends TestTestsNamedInPluginPagesExist to every other
// page: a test the README, CONTRIBUTING.md or a page of docs/ cites is a test function
// of this repository.
func TestTestsNamedInTheDocsExist(t *testing.T) {
	defined := testFuncs(t)
	cited := regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)
	for _, page := range markdownPages(t) {
		if strings.HasPrefix(page, "docs/plugins/") {
			continue // TestTestsNamedInPluginPagesExist
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, page))
		require.NoError(t, err)
		for _, name := range cited.FindAllString(string(data), -1) {
			if _, ok := badNames[name]; ok {
				continue
			}
			assert.True(t, defined[name], "%s cites %s, which no _test.go defines", page, name)
		}
	}
}

// TestTheLinkCheckFindsWhatIsBroken shows the checks failing: links in prose are found
// and those in code are not, a missing file, a missing heading and a path out of the
// repository are each reported, and headings become GitHub's anchors.
func TestTheLinkCheckFindsWhatIsBroken(t *testing.T) {
	page := "See [a](docs/a.md), [b](docs/b.md#part \"title\"), ![img](x.png), [web](https://x.org/y.md),\n" +
		"[mail](mailto:a@b), [here](#top) and `[code](no.md)`.\n" +
		"```\n[block](no.md)\nmake nothing\n```\n"
	assert.Equal(t, []string{"docs/a.md", "docs/b.md#part", "x.png", "#top"}, relativeLinks(page))

	assert.Empty(t, brokenLink("README.md", "CONTRIBUTING.md"))
	assert.Empty(t, brokenLink("README.md", "docs/plugins/"), "a directory is a target")
	assert.Empty(t, brokenLink("docs/plugins/dhcp.md", "../observability.md#the-dhcp-daemon"))
	assert.Empty(t, brokenLink("README.md", "#the-two-commands"), "an anchor of the page itself")
	assert.Contains(t, brokenLink("README.md", "docs/none.md"), "no such file")
	assert.Contains(t, brokenLink("README.md", "#no-such-heading"), "no heading")
	assert.Contains(t, brokenLink("docs/plugins/dhcp.md", "../observability.md#nowhere"), "no heading")
	assert.Contains(t, brokenLink("README.md", "../elsewhere/x.md"), "outside the repository")

	assert.Equal(t, map[string]bool{"cni-log": true, "the-dhcp-daemon": true, "the-dhcp-daemon-1": true,
		"where-we-differ-from-libcni-with-a-conflist": true, "step-1-packages-apt-dnf": true},
		headingAnchors("# `cni log`\n## The dhcp daemon\n```\n# not a heading\n```\n### The dhcp daemon\n"+
			"## Where we differ from libcni, with a conflist\n## Step 1: packages (apt, dnf)\n"))

	assert.Equal(t, []string{"../shared/tools/x.sh", "/work/shared/reference/delta.md"},
		outsidePaths("README.md", "`../shared/tools/x.sh -- make test` and /work/shared/reference/delta.md, not (docs/a.md)"))
	assert.Empty(t, outsidePaths("docs/plugins/dhcp.md", "[x](../observability.md#y) and `../containerd.md`"))
	assert.Equal(t, []string{"../../../x"}, outsidePaths("docs/plugins/dhcp.md", "see ../../x and ../../../x."))

	assert.Equal(t, []string{"image", "packages", "bench", "fuzz", "demo"},
		makeInvocations("`make demo` and\n```sh\nmake image packages   # both\nmake bench REF=DIR\nFUZZTIME=1m make fuzz\n```\n"+
			"prose: make the tap"))
	assert.Equal(t, map[string]bool{"build": true, "deps-demo": true, "deps-test": true, "bin/pause": true},
		makeTargets("GO ?= go\nbuild: $(BIN)\n\tcd x && make:\ndeps-demo deps-test: \nbin/pause:\nX := y\n"))
}

// markdownPages returns README.md, CONTRIBUTING.md and every .md under docs/, relative to
// the repository root.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel, err := filepath.Rel(repoRoot, path)
		pages = append(pages, filepath.ToSlash(rel))
		return err
	})
	require.NoError(t, err)
	return pages
}

var (
	fencedBlock = regexp.MustCompile("(?ms)^\\s*```[^\\n]*\\n.*?^\\s*```[^\\n]*$")
	codeSpan    = regexp.MustCompile("`+[^`]+`+")
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\s*\)`)
	urlScheme   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// prose returns the page without its fenced code blocks and code spans, where a link is
// text, not a link.
func prose(page string) string {
	return codeSpan.ReplaceAllString(fencedBlock.ReplaceAllString(page, ""), "")
}

// relativeLinks returns the targets of the page's inline links and images that are
// neither URLs nor mail addresses.
func relativeLinks(page string) []string {
	var out []string
	for _, m := range inlineLink.FindAllStringSubmatch(prose(page), -1) {
		if !urlScheme.MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// brokenLink says what is wrong with target, a link on page (both relative to the
// repository root), or "" when it resolves.
func brokenLink(page, target string) string {
	path, anchor, _ := strings.Cut(target, "#")
	file := page
	if path != "" {
		file = filepath.ToSlash(filepath.Join(filepath.Dir(page), path))
	}
	if file == ".." || strings.HasPrefix(file, "../") {
		return "points outside the repository"
	}
	info, err := os.Stat(filepath.Join(repoRoot, file))
	if err != nil {
		return "no such file " + file
	}
	if anchor == "" || info.IsDir() || !strings.HasSuffix(file, ".md") {
		return ""
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, file))
	if err != nil {
		return err.Error()
	}
	if !headingAnchors(string(data))[anchor] {
		return "no heading of " + file + " has the anchor #" + anchor
	}
	return ""
}

var (
	dotDotPath = regexp.MustCompile(`(?:^|[\s(\x60'"])(\.\./[^\s\x60'")#]*)`)
	// machineRoot is the development machines' tree, which no reader of the repository has.
	machineRoot = regexp.MustCompile(`/work/[^\s\x60'")]*`)
)

// outsidePaths returns the paths in page (prose and code alike) that leave the repository:
// a ../ path that climbs above the root from the page's directory, or one of the
// development machines' own.
func outsidePaths(page, text string) []string {
	var out []string
	for _, m := range dotDotPath.FindAllStringSubmatch(text, -1) {
		path := strings.TrimRight(m[1], ",.;:")
		p := filepath.ToSlash(filepath.Join(filepath.Dir(page), path))
		if p == ".." || strings.HasPrefix(p, "../") {
			out = append(out, path)
		}
	}
	for _, path := range machineRoot.FindAllString(text, -1) {
		out = append(out, strings.TrimRight(path, ",.;:"))
	}
	return out
}

var atxHeading = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)

// headingAnchors returns the anchors GitHub gives the page's headings: the text lower
// case, without code marks and punctuation other than "-" and "_", spaces as "-", and a
// heading seen before numbered -1, -2, ...
func headingAnchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range atxHeading.FindAllStringSubmatch(fencedBlock.ReplaceAllString(page, ""), -1) {
		var slug strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		anchor := slug.String()
		if n := seen[slug.String()]; n > 0 {
			anchor += "-" + strconv.Itoa(n)
		}
		seen[slug.String()]++
		out[anchor] = true
	}
	return out
}

var (
	makeWord   = regexp.MustCompile(`^[a-z][a-z0-9/._-]*$`)
	makeTarget = regexp.MustCompile(`(?m)^([A-Za-z0-9_./%-][A-Za-z0-9_./% -]*):([^=]|$)`)
)

// makeInvocations returns the targets of every `make ...` in the page's code: the words
// after make that are neither VAR=value nor flags, up to a comment or other text.
func makeInvocations(page string) []string {
	var code []string
	for _, block := range fencedBlock.FindAllString(page, -1) {
		code = append(code, strings.Split(block, "\n")...)
	}
	code = append(code, codeSpan.FindAllString(fencedBlock.ReplaceAllString(page, ""), -1)...)
	var out []string
	for _, line := range code {
		words := strings.Fields(strings.Trim(line, "`"))
		for i, w := range words {
			if w != "make" {
				continue
			}
			for _, arg := range words[i+1:] {
				if strings.Contains(arg, "=") || strings.HasPrefix(arg, "-") {
					continue
				}
				if !makeWord.MatchString(arg) {
					break
				}
				out = append(out, arg)
			}
		}
	}
	return out
}

// makeTargets returns the targets the Makefile's rules name (not its variables).
func makeTargets(makefile string) map[string]bool {
	out := map[string]bool{}
	for _, m := range makeTarget.FindAllStringSubmatch(makefile, -1) {
		for _, name := range strings.Fields(m[1]) {
			out[name] = true
		}
	}
	return out
}
