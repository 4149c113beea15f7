package scripts

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
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
	assert.Contains(t, listed, "./internal/spec/skel FuzzRun", "the module's own targets are found")
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

// fakeGo writes a stand-in for `go` that answers every `go test -fuzz` run with out and
// status, except runs with a count budget (-fuzztime Nx) when countPasses is set.
func fakeGo(t *testing.T, out string, status int, countPasses bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "go")
	script := "#!/bin/sh\n"
	if countPasses {
		script += "case \"$*\" in *'-fuzztime 2000x'*) echo ok; exit 0;; esac\n"
	}
	script += "printf '%s\\n' '" + strings.ReplaceAll(out, "\n", "' '") + "'\n"
	script += "exit " + strconv.Itoa(status) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

func runFuzzScript(t *testing.T, goBin string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "fuzz.sh")
	cmd.Env = append(os.Environ(), "GO="+goBin, "FUZZRETRY=2000x")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

const deadlineRace = "fuzz: elapsed: 3s, execs: 726 (0/sec), new interesting: 0 (total: 50)\n" +
	"--- FAIL: FuzzConvert (4.06s)\n    context deadline exceeded\nFAIL"

// TestFuzzScriptRetriesOnlyTheDeadlineRace: Go 1.26's coordinator fails a target at the
// fuzztime boundary with nothing found (golang/go#75804, the CI run of 2026-11-30);
// fuzz.sh runs such a target again with a count budget, which has no deadline.
func TestFuzzScriptRetriesOnlyTheDeadlineRace(t *testing.T) {
	out, err := runFuzzScript(t, fakeGo(t, deadlineRace, 1, true))
	require.NoError(t, err, out)
	assert.Contains(t, out, "the fuzztime deadline race (golang/go#75804), again for 2000x")
}

func TestFuzzScriptFailsWhenTheRetryFailsToo(t *testing.T) {
	out, err := runFuzzScript(t, fakeGo(t, deadlineRace, 1, false))
	require.Error(t, err)
	assert.Contains(t, out, "again for 2000x")
	assert.Contains(t, out, "fuzz.sh: FAILED ./internal/spec/skel FuzzRun")
}

func TestFuzzScriptNeverRetriesAFinding(t *testing.T) {
	for name, finding := range map[string]string{
		"crasher": "--- FAIL: FuzzConvert (0.10s)\n    --- FAIL: FuzzConvert (0.00s)\n" +
			"        convert_test.go:40: lost a field\n" +
			"    Failing input written to testdata/fuzz/FuzzConvert/abc\n" +
			"    context deadline exceeded\nFAIL",
		"panic": "--- FAIL: FuzzConvert (0.10s)\n    context deadline exceeded\npanic: boom\nFAIL",
		"other": "# github.com/cnikit/cni/internal/result\nresult_test.go:3:1: syntax error\nFAIL",
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runFuzzScript(t, fakeGo(t, finding, 1, true))
			require.Error(t, err)
			assert.NotContains(t, out, "again for")
			assert.Contains(t, out, "fuzz.sh: FAILED ./internal/spec/skel FuzzRun")
		})
	}
}

// TestFuzzScriptOutputSurvivesARedirectToAFile: `make test > log` keeps every target's
// lines (a tee to /dev/fd/1 once reopened the log and truncated it at each target).
func TestFuzzScriptOutputSurvivesARedirectToAFile(t *testing.T) {
	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer log.Close()
	cmd := exec.Command("bash", "fuzz.sh")
	cmd.Env = append(os.Environ(), "GO="+fakeGo(t, "fuzz: elapsed: 3s\nPASS", 0, false))
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Run())
	written, err := os.ReadFile(log.Name())
	require.NoError(t, err)
	listed, err := exec.Command("bash", "fuzz.sh", "-l").Output()
	require.NoError(t, err)
	targets := strings.Split(strings.TrimSpace(string(listed)), "\n")
	assert.Equal(t, len(targets), strings.Count(string(written), "fuzz: elapsed: 3s\nPASS\n"))
	for _, target := range targets {
		assert.Contains(t, string(written), "== "+target+" (3s)\n")
	}
	assert.Contains(t, string(written), "== fuzz: "+strconv.Itoa(len(targets))+" targets in ")
}
