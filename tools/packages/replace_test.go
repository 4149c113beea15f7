package packages_test

// On a kubeadm node kubelet's and kubeadm's packages depend on kubernetes-cni (>= 1.2.0):
// installing ours must take kubernetes-cni's place and keep them, and installing
// kubernetes-cni again must take ours off and keep them too (issue 34). The tests install
// stand-ins of those packages and ours into private roots with the package managers
// themselves; nothing of the machine's dpkg or rpm database is read or written.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/packages"
)

const installed = "install ok installed"

func TestAptPlanForTheDebReplacesKubernetesCNIAndKeepsKubelet(t *testing.T) {
	r := newDpkgRoot(t)
	dir := t.TempDir()
	out, err := r.dpkg("-i", kubernetesCNI.write(t, "deb", dir), kubelet.write(t, "deb", dir))
	require.NoError(t, err, out)
	deb := "./" + filepath.Base(ours(t, "deb", dir))

	plan, err := r.apt(dir, "-s", "install", deb)
	t.Logf("apt-get -s install %s:\n%s", deb, plan)
	require.NoError(t, err)
	assert.Equal(t, []string{packages.Replaced}, planned(plan, "Remv"), "only kubernetes-cni goes")
	assert.Equal(t, []string{"cni"}, planned(plan, "Inst"))
}

func TestDpkgInstallsTheDebOverKubernetesCNIAndKubeletStays(t *testing.T) {
	r := newDpkgRoot(t)
	dir := t.TempDir()
	out, err := r.dpkg("-i", kubernetesCNI.write(t, "deb", dir), kubelet.write(t, "deb", dir))
	require.NoError(t, err, out)

	out, err = r.dpkg("-i", ours(t, "deb", dir))
	t.Logf("dpkg -i cni:\n%s", out)
	require.NoError(t, err)
	assert.Equal(t, installed, r.status(t, "kubelet"))
	assert.Equal(t, installed, r.status(t, "cni"))
	assert.NotEqual(t, installed, r.status(t, packages.Replaced))
	assertOurLinks(t, r.dir)
}

func TestAptInstallOfKubernetesCNITakesTheDebOffAndKubeletStays(t *testing.T) {
	r := newDpkgRoot(t)
	dir := t.TempDir()
	standIn := kubernetesCNI.write(t, "deb", dir)
	out, err := r.dpkg("-i", standIn, kubelet.write(t, "deb", dir))
	require.NoError(t, err, out)
	out, err = r.dpkg("-i", ours(t, "deb", dir))
	require.NoError(t, err, out)

	// dpkg alone refuses: kubernetes-cni does not replace ours, and ours conflicts with
	// it. apt removes ours first, as an operator's apt-get install does.
	out, err = r.dpkg("-i", standIn)
	require.Error(t, err, out)
	assert.Contains(t, out, "conflicting packages - not installing "+packages.Replaced)

	out, err = r.apt(dir, "-y", "install", "./"+filepath.Base(standIn))
	t.Logf("apt-get install ./%s:\n%s", filepath.Base(standIn), out)
	require.NoError(t, err)
	assert.Equal(t, installed, r.status(t, "kubelet"))
	assert.Equal(t, installed, r.status(t, packages.Replaced))
	assert.NotEqual(t, installed, r.status(t, "cni"))
	assertStandInFiles(t, r.dir)
}

func TestRpmUpgradeReplacesKubernetesCNIAndKubeletStays(t *testing.T) {
	r := newRPMRoot(t)
	dir := t.TempDir()
	standIn := kubernetesCNI.write(t, "rpm", dir)
	out, err := r.install("-i", standIn, kubelet.write(t, "rpm", dir))
	require.NoError(t, err, out)

	out, err = r.install("-U", ours(t, "rpm", dir))
	t.Logf("rpm -U cni:\n%s", out)
	require.NoError(t, err)
	out, err = r.rpm("-q", "kubelet")
	assert.NoError(t, err, out)
	out, err = r.rpm("-q", packages.Replaced)
	assert.Error(t, err)
	assert.Contains(t, out, "package "+packages.Replaced+" is not installed")
	out, err = r.rpm("-q", "--qf", "%{NAME}\n", "--whatprovides", packages.Replaced)
	assert.NoError(t, err, out)
	assert.Equal(t, "cni\n", out)
	assertOurLinks(t, r.dir)

	// The rpm has no Conflicts: its Obsoletes keeps kubernetes-cni off beside it all the same.
	out, err = r.install("-U", standIn)
	assert.Error(t, err)
	assert.Contains(t, out, packages.Replaced+" is obsoleted by (installed) cni-")
}

func TestReferenceVersionIsTheInteropTestsOne(t *testing.T) {
	path := filepath.Join(cnibuild.Root(), "internal", "testbed", "reftest", "reftest.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	assert.Equal(t, "v"+packages.ReferenceVersion, constString(t, f, "Version"),
		"packages.ReferenceVersion, the kubernetes-cni version the packages provide, is not the reference release of %s", path)
}

func TestOperatorsPageNamesTheVersionProvided(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(cnibuild.Root(), "docs", "operators.md"))
	require.NoError(t, err)
	assert.Contains(t, string(page), "provide it as "+packages.ReferenceVersion+",",
		"docs/operators.md's packages section names the kubernetes-cni version the packages provide")
}

// constString is the value of the string constant name of f.
func constString(t *testing.T, f *ast.File, name string) string {
	t.Helper()
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, n := range v.Names {
				if lit, ok := v.Values[i].(*ast.BasicLit); ok && n.Name == name && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					return s
				}
			}
		}
	}
	t.Fatalf("no string constant %s in %s", name, f.Name.Name)
	return ""
}

// planned lists the packages of apt-get -s output's lines of verb (Inst, Remv, Conf).
func planned(plan, verb string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^`+verb+` (\S+) `).FindAllStringSubmatch(plan, -1) {
		names = append(names, m[1])
	}
	return names
}

// assertOurLinks checks that every path kubernetes-cni held in root is now our link to
// the binary, and that its bridge answers as a runtime asks.
func assertOurLinks(t *testing.T, root string) {
	t.Helper()
	for _, f := range kubernetesCNI.files {
		link, err := os.Readlink(filepath.Join(root, f))
		if assert.NoError(t, err, "%s is not our link", f) {
			assert.Equal(t, "cni", link, f)
		}
	}
	cnibuild.AssertAnswersVersion(t, filepath.Join(root, packages.PluginDir, "bridge"))
}

// assertStandInFiles checks that kubernetes-cni's files are back in root as regular
// files, and our binary gone.
func assertStandInFiles(t *testing.T, root string) {
	t.Helper()
	for _, f := range kubernetesCNI.files {
		fi, err := os.Lstat(filepath.Join(root, f))
		if assert.NoError(t, err) {
			assert.True(t, fi.Mode().IsRegular(), "%s: %s", f, fi.Mode())
		}
	}
	assert.NoFileExists(t, filepath.Join(root, packages.PluginDir, "cni"))
}
