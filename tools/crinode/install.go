package crinode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// StandardList is the standard chain as a node's conflist: bridge with host-local,
// portmap, bandwidth. cniVersion 1.0.0: containerd 1.6's libcni knows no 1.1.0.
const StandardList = `{"cniVersion":"1.0.0","name":"std","plugins":[
  {"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"hairpinMode":true,
   "ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]],"routes":[{"dst":"0.0.0.0/0"}]}},
  {"type":"portmap","capabilities":{"portMappings":true}},
  {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`

// StandardList11 is StandardList at cniVersion 1.1.0, as a CRI-O node takes it: CRI-O's
// libcni passes GC and STATUS to the plugins only from 1.1.0 on (at 1.0.0 its GC only
// drops cache entries).
var StandardList11 = strings.Replace(StandardList, `"cniVersion":"1.0.0"`, `"cniVersion":"1.1.0"`, 1)

// Install puts the cni binary and its plugin names into dir/bin with cni install, and
// list into the network config as cni install writes it with flag: --conf (as it is,
// one exec per plugin) or --one-exec (one chain plugin). It returns the bin dir and the
// config's bytes, for Options.
func Install(cni, dir, flag, list string) (binDir string, conf []byte, err error) {
	src := filepath.Join(dir, "src", "10-std.conflist")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(src, []byte(list), 0o644); err != nil {
		return "", nil, err
	}
	binDir, staged := filepath.Join(dir, "bin"), filepath.Join(dir, "staged")
	if out, err := exec.Command(cni, "install", "--dir", binDir, flag, src, "--conf-dir", staged).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("cni install %s: %w\n%s", flag, err, out)
	}
	conf, err = os.ReadFile(filepath.Join(staged, filepath.Base(src)))
	return binDir, conf, err
}

// ReferencePlugins are the reference binaries a node needs for StandardList, loopback
// included: go-cni runs its own loopback network before the configured one.
var ReferencePlugins = []string{"loopback", "bridge", "host-local", "portmap", "bandwidth"}

// InstallReference links the reference plugins of refDir into dir/bin and returns it.
func InstallReference(refDir, dir string) (string, error) {
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", err
	}
	for _, p := range ReferencePlugins {
		src, err := filepath.Abs(filepath.Join(refDir, p))
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(src); err != nil {
			return "", fmt.Errorf("reference plugins: %w", err)
		}
		if err := os.Symlink(src, filepath.Join(binDir, p)); err != nil {
			return "", err
		}
	}
	return binDir, nil
}
