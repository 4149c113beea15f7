package image_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/cnibuild"
)

func TestMain(m *testing.M) { cnibuild.Main(m) }

func options(t *testing.T) image.Options {
	t.Helper()
	o := image.Options{
		Binaries:  map[string]string{},
		GCCallers: map[string]string{},
		Version:   "v1.2.3-test",
		Revision:  "abc1234",
		Source:    "https://example.com/cni",
		Created:   time.Unix(1767225600, 0).UTC(),
		Name:      "docker.io/cnikit/cni",
	}
	for _, arch := range []string{"amd64", "arm64"} {
		bin, err := cnibuild.Binary(arch)
		require.NoError(t, err)
		o.Binaries[arch] = bin
		gc, err := cnibuild.GCCaller(arch)
		require.NoError(t, err)
		o.GCCallers[arch] = gc
	}
	return o
}

// build writes the archive and returns its bytes.
func build(t *testing.T, o image.Options) []byte {
	t.Helper()
	idx, err := image.Index(o)
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, image.WriteArchive(&b, idx, o))
	return b.Bytes()
}

// defaultArchive is the archive of options(t), built once for the tests that only
// read it.
var defaultArchive = struct {
	sync.Mutex
	data []byte
}{}

func archiveBytes(t *testing.T) []byte {
	t.Helper()
	defaultArchive.Lock()
	defer defaultArchive.Unlock()
	if defaultArchive.data == nil {
		defaultArchive.data = build(t, options(t))
	}
	return defaultArchive.data
}

// untar returns the regular files of a tar by name, and the order of all entries.
func untar(t *testing.T, r io.Reader) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var hdrs []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		require.NoError(t, err)
		hdrs = append(hdrs, h)
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = data
		}
	}
}

func blob(t *testing.T, files map[string][]byte, d v1.Hash) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+d.Hex]
	require.True(t, ok, "blob %s missing", d)
	sum := sha256.Sum256(data)
	require.Equal(t, d.Hex, hex.EncodeToString(sum[:]), "blob content matches its name")
	return data
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(data, &v))
	return v
}

// platformImages reads index.json down to one manifest and config per architecture.
func platformImages(t *testing.T, files map[string][]byte) (top v1.IndexManifest, idx v1.IndexManifest, byArch map[string]v1.Manifest, configs map[string]v1.ConfigFile) {
	t.Helper()
	top = decode[v1.IndexManifest](t, files["index.json"])
	require.Len(t, top.Manifests, 1, "one entry: podman and skopeo then need no reference to pick")
	require.Equal(t, types.OCIImageIndex, top.Manifests[0].MediaType)
	idx = decode[v1.IndexManifest](t, blob(t, files, top.Manifests[0].Digest))
	byArch, configs = map[string]v1.Manifest{}, map[string]v1.ConfigFile{}
	for _, d := range idx.Manifests {
		require.NotNil(t, d.Platform)
		m := decode[v1.Manifest](t, blob(t, files, d.Digest))
		byArch[d.Platform.Architecture] = m
		configs[d.Platform.Architecture] = decode[v1.ConfigFile](t, blob(t, files, m.Config.Digest))
	}
	return top, idx, byArch, configs
}

func TestArchiveIndexHoldsBothArchitectures(t *testing.T) {
	o := options(t)
	files, _ := untar(t, bytes.NewReader(archiveBytes(t)))

	assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))
	top, idx, byArch, configs := platformImages(t, files)
	assert.Equal(t, "docker.io/cnikit/cni:v1.2.3-test", top.Manifests[0].Annotations["io.containerd.image.name"])
	assert.Equal(t, "v1.2.3-test", top.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	var platforms []string
	for _, d := range idx.Manifests {
		platforms = append(platforms, d.Platform.String())
		assert.Equal(t, types.OCIManifestSchema1, d.MediaType)
		assert.Empty(t, d.ArtifactType)
	}
	assert.Equal(t, []string{"linux/amd64", "linux/arm64/v8"}, platforms)
	assert.Equal(t, "v1.2.3-test", idx.Annotations["org.opencontainers.image.version"])
	for arch, cf := range configs {
		assert.Equal(t, arch, cf.Architecture)
		assert.Equal(t, "linux", cf.OS)
		assert.Equal(t, []string{"/cni"}, cf.Config.Entrypoint, arch)
		assert.Equal(t, []string{"version"}, cf.Config.Cmd)
		assert.Equal(t, "0:0", cf.Config.User)
		assert.Empty(t, cf.Config.Env, "nothing but the binary: no PATH, no certificates")
		assert.Equal(t, "v1.2.3-test", cf.Config.Labels["org.opencontainers.image.version"])
		assert.Equal(t, "https://example.com/cni", cf.Config.Labels["org.opencontainers.image.source"])
		assert.Equal(t, "abc1234", cf.Config.Labels["org.opencontainers.image.revision"])
		assert.Equal(t, o.Created, cf.Created.Time)
		require.Len(t, byArch[arch].Layers, 1)
		assert.Equal(t, types.OCILayer, byArch[arch].Layers[0].MediaType)
	}

	// go-containerregistry's own validation reads the layout back: every digest, size
	// and diff id is checked.
	dir := t.TempDir()
	for name, data := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	lp, err := layout.FromPath(dir)
	require.NoError(t, err)
	ii, err := lp.ImageIndex()
	require.NoError(t, err)
	nested, err := ii.ImageIndex(top.Manifests[0].Digest)
	require.NoError(t, err)
	require.NoError(t, validate.Index(nested))
}

// layerFiles unpacks the one layer of arch.
func layerFiles(t *testing.T, files map[string][]byte, arch string) (map[string][]byte, []*tar.Header) {
	t.Helper()
	_, _, byArch, _ := platformImages(t, files)
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, byArch[arch].Layers[0].Digest)))
	require.NoError(t, err)
	return untar(t, zr)
}

// With a tag, the archive names the image by it (make image gives the release the
// manifests name) while the version label still says which build it is.
func TestArchiveNamesTheImageByItsTag(t *testing.T) {
	o := options(t)
	o.Tag = "v9.9.9"
	files, _ := untar(t, bytes.NewReader(build(t, o)))
	top, idx, _, _ := platformImages(t, files)
	assert.Equal(t, "docker.io/cnikit/cni:v9.9.9", top.Manifests[0].Annotations["io.containerd.image.name"])
	assert.Equal(t, "v9.9.9", top.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	assert.Equal(t, "v1.2.3-test", idx.Annotations["org.opencontainers.image.version"])
	var entries []struct{ RepoTags []string }
	require.NoError(t, json.Unmarshal(files["manifest.json"], &entries))
	var tags []string
	for _, e := range entries {
		tags = append(tags, e.RepoTags...)
	}
	assert.ElementsMatch(t, []string{"docker.io/cnikit/cni:v9.9.9", "docker.io/cnikit/cni:v9.9.9-amd64", "docker.io/cnikit/cni:v9.9.9-arm64"}, tags)
}

func TestAmd64LayerBinaryAnswersVersion(t *testing.T) {
	files, _ := untar(t, bytes.NewReader(archiveBytes(t)))
	layer, hdrs := layerFiles(t, files, "amd64")

	var names []string
	for _, h := range hdrs {
		names = append(names, fmt.Sprintf("%s %o %d:%d", h.Name, h.Mode, h.Uid, h.Gid))
	}
	assert.Equal(t, []string{"cni 755 0:0", "cni-gc-cri 755 0:0", "tmp/ 1777 0:0"}, names, "the binary, its GC caller and /tmp, nothing else")

	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "cni"), layer["cni"], 0o755))
	require.NoError(t, os.Symlink("cni", filepath.Join(root, "bridge")))
	cmd := exec.Command(filepath.Join(root, "bridge"))
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	out, err := cmd.Output()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"supportedVersions"`)
	assert.Contains(t, string(out), `"1.1.0"`)

	require.NoError(t, os.WriteFile(filepath.Join(root, "cni-gc-cri"), layer["cni-gc-cri"], 0o755))
	out, err = exec.Command(filepath.Join(root, "cni-gc-cri"), "-help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-socket", "the GC caller, which the DaemonSet's gc container runs")
}

func TestArm64LayerHoldsAnArm64Binary(t *testing.T) {
	files, _ := untar(t, bytes.NewReader(archiveBytes(t)))
	layer, _ := layerFiles(t, files, "arm64")
	bin := layer["cni"]
	require.Greater(t, len(bin), 20)
	assert.Equal(t, []byte("\x7fELF"), bin[:4])
	assert.Equal(t, []byte{0xb7, 0x00}, bin[18:20], "e_machine EM_AARCH64")
}

// docker load reads manifest.json; it checks every layer against the config's diff ids.
func TestDockerManifestPointsAtTheSameBlobs(t *testing.T) {
	files, _ := untar(t, bytes.NewReader(archiveBytes(t)))
	var entries []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	require.NoError(t, json.Unmarshal(files["manifest.json"], &entries))
	require.Len(t, entries, 2)
	tags := map[string][]string{}
	for _, e := range entries {
		cf := decode[v1.ConfigFile](t, files[e.Config])
		tags[cf.Architecture] = e.RepoTags
		require.Len(t, e.Layers, len(cf.RootFS.DiffIDs))
		for i, l := range e.Layers {
			zr, err := gzip.NewReader(bytes.NewReader(files[l]))
			require.NoError(t, err)
			h := sha256.New()
			_, err = io.Copy(h, zr)
			require.NoError(t, err)
			assert.Equal(t, cf.RootFS.DiffIDs[i].Hex, hex.EncodeToString(h.Sum(nil)))
		}
	}
	assert.Equal(t, map[string][]string{
		"amd64": {"docker.io/cnikit/cni:v1.2.3-test", "docker.io/cnikit/cni:v1.2.3-test-amd64"},
		"arm64": {"docker.io/cnikit/cni:v1.2.3-test-arm64"},
	}, tags)
}

func TestSameInputsGiveTheSameDigest(t *testing.T) {
	o := options(t)
	// The same sources built twice into other paths, at other times: -trimpath and
	// -buildid= make the binaries equal (amd64 only: the property does not depend on
	// the architecture, and a link costs seconds), the fixed epoch and sorted entries
	// make the archives equal.
	inputs := func() image.Options {
		in := o
		in.Binaries = map[string]string{}
		out := filepath.Join(t.TempDir(), "cni")
		require.NoError(t, cnibuild.Build("amd64", out))
		in.Binaries["amd64"] = out
		arm, err := os.ReadFile(o.Binaries["arm64"])
		require.NoError(t, err)
		in.Binaries["arm64"] = filepath.Join(t.TempDir(), "cni")
		require.NoError(t, os.WriteFile(in.Binaries["arm64"], arm, 0o755))
		return in
	}
	firstIn := inputs()
	first := build(t, firstIn)
	secondIn := inputs()
	for _, p := range secondIn.Binaries {
		require.NoError(t, os.Chtimes(p, time.Now(), time.Now().Add(-time.Hour)))
	}
	again := build(t, secondIn)
	a, err := os.ReadFile(firstIn.Binaries["amd64"])
	require.NoError(t, err)
	b, err := os.ReadFile(secondIn.Binaries["amd64"])
	require.NoError(t, err)
	require.True(t, bytes.Equal(a, b), "two builds of the same source give the same binary")

	files1, hdrs1 := untar(t, bytes.NewReader(first))
	files2, _ := untar(t, bytes.NewReader(again))
	top1, top2 := decode[v1.IndexManifest](t, files1["index.json"]), decode[v1.IndexManifest](t, files2["index.json"])
	assert.Equal(t, top1.Manifests[0].Digest, top2.Manifests[0].Digest, "same index digest")
	assert.True(t, bytes.Equal(first, again), "byte-identical archives")
	var names []string
	for _, h := range hdrs1 {
		names = append(names, h.Name)
		assert.Equal(t, o.Created, h.ModTime.UTC(), h.Name)
	}
	assert.IsNonDecreasing(t, names, "sorted entries")

	changed := o
	changed.Version = "v1.2.4"
	assert.NotEqual(t, top1.Manifests[0].Digest, decode[v1.IndexManifest](t, func() []byte {
		f, _ := untar(t, bytes.NewReader(build(t, changed)))
		return f["index.json"]
	}()).Manifests[0].Digest, "another version is another image")
}

// The Containerfile is the same image for people who build with podman or docker.
func TestContainerfileDescribesTheSameImage(t *testing.T) {
	o := options(t)
	f, err := os.Open(filepath.Join(cnibuild.Root(), "Containerfile"))
	require.NoError(t, err)
	defer f.Close()
	var final []string // instructions of the last stage, continuation lines joined
	var cur string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		cur += line
		if strings.HasPrefix(cur, "FROM ") {
			final = nil
		}
		final = append(final, cur)
		cur = ""
	}
	require.NoError(t, sc.Err())
	want := image.Config(o)
	got := map[string]string{}
	labels := map[string]string{}
	labelRE := regexp.MustCompile(`([a-z.]+)="([^"]*)"`)
	for _, ins := range final {
		kw, rest, _ := strings.Cut(ins, " ")
		switch kw {
		case "LABEL":
			for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
				labels[m[1]] = m[2]
			}
		default:
			got[kw] = rest
		}
	}
	assert.Equal(t, "scratch", got["FROM"])
	whole, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	assert.Contains(t, string(whole), "-o /out"+image.GCCallerPath+" ./cmd/cni-gc-cri", "the build stage builds the GC caller")
	assert.Equal(t, mustJSON(t, want.Entrypoint), got["ENTRYPOINT"])
	assert.Equal(t, mustJSON(t, want.Cmd), got["CMD"])
	assert.Equal(t, want.User, got["USER"])
	assert.Equal(t, want.WorkingDir, got["WORKDIR"])
	require.Len(t, labels, len(want.Labels))
	for k, v := range want.Labels {
		require.Contains(t, labels, k)
		if !strings.HasPrefix(labels[k], "$") {
			assert.Equal(t, v, labels[k], k)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// writeArchive writes the archive to a file, as make image does.
func writeArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cni-image.tar")
	require.NoError(t, os.WriteFile(p, archiveBytes(t), 0o644))
	return p
}

func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (apt-get install %s): the archive's format is checked by the tests above", name, name)
	}
	return p
}

// podman load reads the archive as an OCI archive and picks this machine's platform;
// everything goes to a private store under the test's temp dir.
func TestPodmanLoadsTheArchive(t *testing.T) {
	podman := lookTool(t, "podman")
	archive := writeArchive(t)
	store := t.TempDir()
	pm := func(args ...string) string {
		t.Helper()
		base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"),
			"--tmpdir", filepath.Join(store, "tmp"), "--storage-driver", "vfs", "--events-backend", "none"}
		out, err := exec.Command(podman, append(base, args...)...).CombinedOutput()
		require.NoError(t, err, "podman %v: %s", args, out)
		return string(out)
	}

	out := pm("load", "-i", archive)

	assert.Contains(t, out, "Loaded image: docker.io/cnikit/cni:v1.2.3-test")
	got := pm("image", "inspect", "docker.io/cnikit/cni:v1.2.3-test", "--format",
		`{{.Os}}/{{.Architecture}} {{json .Config.Entrypoint}} {{index .Labels "org.opencontainers.image.source"}}`)
	assert.Equal(t, `linux/amd64 ["/cni"] https://example.com/cni`, strings.TrimSpace(got))
}

// skopeo reads it both ways: as an OCI archive (either architecture) and as a docker
// archive (what docker load reads).
func TestSkopeoReadsBothFormats(t *testing.T) {
	skopeo := lookTool(t, "skopeo")
	archive := writeArchive(t)
	inspect := func(args ...string) map[string]any {
		t.Helper()
		out, err := exec.Command(skopeo, append([]string{"inspect"}, args...)...).CombinedOutput()
		require.NoError(t, err, "skopeo inspect %v: %s", args, out)
		return decode[map[string]any](t, out)
	}
	assert.Equal(t, "arm64", inspect("--override-arch", "arm64", "oci-archive:"+archive)["Architecture"])
	assert.Equal(t, "amd64", inspect("--override-arch", "amd64", "oci-archive:"+archive)["Architecture"])
	amd := inspect("docker-archive:" + archive + ":docker.io/cnikit/cni:v1.2.3-test")
	assert.Equal(t, "amd64", amd["Architecture"])
	arm := inspect("docker-archive:" + archive + ":docker.io/cnikit/cni:v1.2.3-test-arm64")
	assert.Equal(t, "arm64", arm["Architecture"])
}

// podman runs the image's binary in a container the way the DaemonSet does: cni install
// into bind-mounted host directories on a read-only root, then cni sleep as PID 1
// stopped by SIGTERM. runc, because crun refuses this machine's hybrid cgroup layout;
// "--ulimit host" and no default ulimits, because this sandbox forbids setrlimit (both
// are harmless elsewhere).
func TestPodmanRunsInstallAndSleep(t *testing.T) {
	podman := lookTool(t, "podman")
	runc := lookTool(t, "runc")
	archive := writeArchive(t)
	// A short path of its own: podman refuses a run root longer than 50 characters.
	store, err := os.MkdirTemp("", "pm")
	require.NoError(t, err)
	conf := filepath.Join(store, "containers.conf")
	require.NoError(t, os.WriteFile(conf, []byte("[containers]\ndefault_ulimits = []\n"), 0o644))
	podmanCmd := func(args ...string) *exec.Cmd {
		base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"),
			"--tmpdir", filepath.Join(store, "tmp"), "--storage-driver", "vfs", "--events-backend", "none",
			"--cgroup-manager", "cgroupfs", "--runtime", runc}
		cmd := exec.Command(podman, append(base, args...)...)
		cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
		return cmd
	}
	t.Cleanup(func() {
		podmanCmd("rm", "-f", "-a").Run()
		os.RemoveAll(store)
	})
	pm := func(args ...string) string {
		t.Helper()
		out, err := podmanCmd(args...).CombinedOutput()
		require.NoError(t, err, "podman %v: %s", args, out)
		return string(out)
	}
	pm("load", "-q", "-i", archive)
	host := t.TempDir()
	for _, d := range []string{"opt/cni/bin", "etc/cni/net.d", "config"} {
		require.NoError(t, os.MkdirAll(filepath.Join(host, d), 0o755))
	}
	confList := `{"cniVersion":"1.1.0","name":"k8s","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.88.0.0/16"}}]}`
	require.NoError(t, os.WriteFile(filepath.Join(host, "config/10-k8s.conflist"), []byte(confList), 0o644))
	ref := "docker.io/cnikit/cni:v1.2.3-test"

	out := pm("run", "--rm", "--network", "none", "--ulimit", "host", "--read-only",
		"-v", filepath.Join(host, "opt/cni/bin")+":/host/opt/cni/bin",
		"-v", filepath.Join(host, "etc/cni/net.d")+":/host/etc/cni/net.d",
		"-v", filepath.Join(host, "config")+":/etc/cni-install:ro",
		ref, "install", "--dir", "/host/opt/cni/bin", "--conf", "/etc/cni-install/10-k8s.conflist", "--conf-dir", "/host/etc/cni/net.d")

	assert.Contains(t, out, "write /host/etc/cni/net.d/10-k8s.conflist")
	cmd := exec.Command(filepath.Join(host, "opt/cni/bin/bridge"))
	cmd.Env = []string{"CNI_COMMAND=VERSION"}
	version, err := cmd.Output()
	require.NoError(t, err)
	assert.Contains(t, string(version), `"cniVersion"`)
	assert.FileExists(t, filepath.Join(host, "etc/cni/net.d/10-k8s.conflist"))

	pm("run", "-d", "--name", "sleep", "--network", "none", "--ulimit", "host", ref, "sleep")
	pm("stop", "-t", "30", "sleep")
	// Killed after the grace period it would show 137.
	assert.Equal(t, "0", strings.TrimSpace(pm("inspect", "sleep", "--format", "{{.State.ExitCode}}")), "exits 0 on SIGTERM as PID 1")
}
