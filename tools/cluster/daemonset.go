package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/cnibuild"
	"github.com/cnikit/cni/tools/manifest"
)

// Profile is the path of one of deploy/kubernetes's manifests, by file name.
func Profile(name string) string {
	return filepath.Join(cnibuild.Root(), "deploy", "kubernetes", name)
}

// RunInstallStep runs the init container of the DaemonSet of the manifest at path on
// n, exactly as the manifest specifies it (command, arguments, volumes, ConfigMap) and
// as the kubelet runs a hostNetwork pod: in the node's network namespace, with the
// image's binary, which is binary. It returns what the container printed.
func (n *Node) RunInstallStep(path, binary string) (string, error) {
	objs, err := manifest.Load(path)
	if err != nil {
		return "", err
	}
	ds, err := objs.DaemonSet()
	if err != nil {
		return "", err
	}
	spec := ds.Spec.Template.Spec
	if len(spec.InitContainers) != 1 {
		return "", fmt.Errorf("%s: %d init containers, not one", path, len(spec.InitContainers))
	}
	if !spec.HostNetwork {
		return "", fmt.Errorf("%s: the installer is not a hostNetwork pod", path)
	}
	ct, err := manifest.NewContainer(spec.InitContainers[0], spec.Volumes, manifest.Layout{
		Binary: binary, ImagePath: image.BinaryPath, HostPath: n.HostPath, ConfigMaps: objs.ConfigMaps,
	})
	if err != nil {
		return "", err
	}
	defer ct.Close()
	return ct.Run("nsenter", "--target", strconv.Itoa(n.Pid()), "--net", "--")
}

// UninstallCommand is what docs/cluster.md tells an operator to run on a node to take
// cni off again, with the binary the node holds.
func UninstallCommand() []string {
	return []string{filepath.Join(BinDir, "cni"), "install", "--uninstall", "--dir", BinDir, "--conf-dir", ConfDir}
}

// Uninstall runs UninstallCommand on n.
func (n *Node) Uninstall() (string, error) {
	cmd := UninstallCommand()
	return n.Run(cmd[0], cmd[1:]...)
}
