package nlconn

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// opensItsOwn matches what opens a netlink handle or socket, or sends a hand-built
// request, without this package: a handle without a deadline, a request that may
// get no answer (issue 36).
var opensItsOwn = regexp.MustCompile(`netlink\.NewHandle(At|AtFrom)?\(|nl\.GetNetlinkSocketAt\(|nl\.Subscribe(At)?\(|\.Execute(Iter)?\(unix\.NETLINK_|\.Execute(Iter)?\(syscall\.NETLINK_`)

// TestEveryNetlinkHandleOfOursIsOpenedHere reads the production code of the module (no
// tests, no test bed, not the benchmark tool): only this package may open a netlink
// handle or socket or execute a hand-built request, so that each has the deadline.
func TestEveryNetlinkHandleOfOursIsOpenedHere(t *testing.T) {
	assert.Empty(t, productionLinesMatching(t, opensItsOwn),
		"open netlink handles and send hand-built requests through nlconn.Open and nlconn.Execute")
}

// TestNoDumpOfOursBypassesTheRetry reads the same code for a dump that would not retry
// an interrupted answer: one on a raw *netlink.Handle (held, or reached through a
// Handle's embedded one), one of netlink's package-level functions, or one of a kind
// Handle does not wrap yet (its methods are read from dump.go). Every method of
// netlink.Handle named *List* is a dump.
func TestNoDumpOfOursBypassesTheRetry(t *testing.T) {
	wrapped := handleMethods(t, "dump.go")
	require.Contains(t, wrapped, "AddrList")
	var all, unwrapped []string
	ht := reflect.TypeOf((*netlink.Handle)(nil))
	for i := range ht.NumMethod() {
		if name := ht.Method(i).Name; strings.Contains(name, "List") {
			all = append(all, name)
			if !slices.Contains(wrapped, name) {
				unwrapped = append(unwrapped, name)
			}
		}
	}
	dumps := strings.Join(all, "|")
	raw := regexp.MustCompile(`\*netlink\.Handle\b|\.Handle\.(` + dumps + `)\(|\bnetlink\.(` + dumps + `)\(|\.(` + strings.Join(unwrapped, "|") + `)\(`)
	assert.Empty(t, productionLinesMatching(t, raw),
		"dump through an nlconn.Handle (add the dump to dump.go when it has no method there)")
}

// handleMethods lists the methods file declares on *Handle.
func handleMethods(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var names []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok && star.X.(*ast.Ident).Name == "Handle" {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}

// productionLinesMatching returns the lines of the module's production code outside
// this package (no tests, no test bed, not the benchmark tool) that match re, comments
// left out, as "path:line: text".
func productionLinesMatching(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root")
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") || rel == "internal/testbed" || rel == "cmd/cnibench" || rel == "internal/host/nlconn"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if re.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				found = append(found, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	}))
	return found
}
