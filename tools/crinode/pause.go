package crinode

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/cnikit/cni/tools/internal/cnibuild"
)

// PauseImage is the sandbox image every node uses, imported before containerd needs
// it: nothing is pulled.
const PauseImage = "localhost/cni-e2e/pause:1"

// BuildPause builds ./cmd/pause static into dir/pause and packs it (PackPause). It
// returns both paths. It needs the source tree; a binary built without it (make bench's
// cri-bench) takes a prebuilt pause and calls PackPause.
func BuildPause(dir string) (bin, archive string, err error) {
	bin = filepath.Join(dir, "pause")
	cmd := exec.Command("go", append(append([]string{"build"}, cnibuild.Flags...), "-o", bin, "./cmd/pause")...)
	cmd.Dir = filepath.Join(cnibuild.Root(), "tools")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./cmd/pause: %w\n%s", err, out)
	}
	archive, err = PackPause(bin, dir)
	return bin, archive, err
}

// PackPause packs the pause binary as PauseImage in a docker save archive,
// dir/pause.tar, for ctr images import, and returns its path.
func PackPause(bin, dir string) (string, error) {
	img, err := pauseImage(bin)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(PauseImage)
	if err != nil {
		return "", err
	}
	archive := filepath.Join(dir, "pause.tar")
	f, err := os.Create(archive)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := tarball.Write(ref, img, f); err != nil {
		return "", fmt.Errorf("write %s: %w", archive, err)
	}
	return archive, f.Close()
}

// pauseImage is one layer holding /pause, run as the image's entrypoint.
func pauseImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "pause", Mode: 0o755, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtimeArch()
	cf.Config.Entrypoint = []string{"/pause"}
	return mutate.ConfigFile(img, cf)
}

// RunTests is the TestMain of a package whose tests start nodes: it builds the pause
// binary and its image into a temp dir, hands their paths to set, runs the tests and
// removes the builds (the pause's and cnibuild's). It returns the exit code.
func RunTests(m *testing.M, set func(pause, archive string)) int {
	defer cnibuild.Cleanup()
	dir, err := os.MkdirTemp("", "cni-pause-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	pause, archive, err := BuildPause(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	set(pause, archive)
	return m.Run()
}
