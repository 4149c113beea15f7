package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFuzzScriptFindsEveryFuzzTarget checks fuzz.sh's grep against Go's own parser:
// every func FuzzXxx(*testing.F) in a test file of the module is listed, so `make fuzz`
// (and with it `make test`) runs it, and nothing else is.
func TestFuzzScriptFindsEveryFuzzTarget(t *testing.T) {
	out, err := exec.Command("bash", "fuzz.sh", "-l").Output()
	require.NoError(t, err)
	listed := strings.Split(strings.TrimSpace(string(out)), "\n")

	var want []string
	fset := token.NewFileSet()
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && isFuzzTarget(fn) {
				rel, _ := filepath.Rel("..", filepath.Dir(path))
				want = append(want, "./"+rel+" "+fn.Name.Name)
			}
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(want)
	assert.Equal(t, want, listed)
	assert.Contains(t, listed, "./internal/skel FuzzRun", "the module's own targets are found")
}

func isFuzzTarget(fn *ast.FuncDecl) bool {
	if fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
		return false
	}
	star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "testing" && sel.Sel.Name == "F"
}
