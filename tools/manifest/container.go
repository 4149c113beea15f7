package manifest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Container is one container of a pod spec laid out to run: a root file system holding
// the image's binary, and the pod's volumes as directories of the machine, bound where
// the container mounts them when it runs.
type Container struct {
	rootfs  string
	mounts  []mount
	command []string
	// cleanup are the directories made for it (the root, ConfigMap volumes).
	cleanup []string
}

type mount struct {
	source, target string
	readOnly       bool
}

// Layout says where a container's pieces come from.
type Layout struct {
	// Binary is the image's program, put at ImagePath in the container's root.
	Binary, ImagePath string
	// Files are the image's other programs: their path in the image to the file of the
	// machine that holds it.
	Files map[string]string
	// HostPath maps a hostPath volume's path to the directory of the machine that
	// plays it (a test's host root, a lab node's disk).
	HostPath func(path string) (string, error)
	// ConfigMaps are the manifest's, for configMap volumes.
	ConfigMaps []corev1.ConfigMap
}

// NewContainer lays out c of a pod whose volumes are vols. hostPath volumes must be
// DirectoryOrCreate, and are created as the kubelet creates them.
func NewContainer(c corev1.Container, vols []corev1.Volume, l Layout) (_ *Container, err error) {
	ct := &Container{command: append(slices.Clone(c.Command), c.Args...)}
	defer func() {
		if err != nil {
			ct.Close()
		}
	}()
	if ct.rootfs, err = ct.tempDir("cni-container-"); err != nil {
		return nil, err
	}
	files := map[string]string{l.ImagePath: l.Binary}
	for imagePath, src := range l.Files {
		files[imagePath] = src
	}
	for imagePath, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(ct.rootfs, imagePath), data, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(filepath.Join(ct.rootfs, "proc"), 0o555); err != nil {
		return nil, err
	}
	// Every runtime gives a container /dev/null (Go's os/exec opens it for a child's
	// stdin): the machine's is bound on this file.
	if err := os.Mkdir(filepath.Join(ct.rootfs, "dev"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(ct.rootfs, "dev", "null"), nil, 0o666); err != nil {
		return nil, err
	}
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(vols, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 {
			return nil, fmt.Errorf("%s mounts volume %s, which the pod does not have", c.Name, m.Name)
		}
		src, err := ct.volumeSource(vols[i], l)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Name, err)
		}
		if err := os.MkdirAll(filepath.Join(ct.rootfs, m.MountPath), 0o755); err != nil {
			return nil, err
		}
		ct.mounts = append(ct.mounts, mount{source: src, target: m.MountPath, readOnly: m.ReadOnly})
	}
	return ct, nil
}

func (ct *Container) tempDir(pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		ct.cleanup = append(ct.cleanup, d)
	}
	return d, err
}

func (ct *Container) volumeSource(v corev1.Volume, l Layout) (string, error) {
	switch {
	case v.HostPath != nil:
		if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			return "", errors.New("a hostPath volume of the installer must be DirectoryOrCreate: the installer creates the node's dirs")
		}
		p, err := l.HostPath(v.HostPath.Path)
		if err != nil {
			return "", err
		}
		return p, os.MkdirAll(p, 0o755)
	case v.ConfigMap != nil:
		i := slices.IndexFunc(l.ConfigMaps, func(cm corev1.ConfigMap) bool { return cm.Name == v.ConfigMap.Name })
		if i < 0 {
			return "", fmt.Errorf("ConfigMap %s is not in the manifest", v.ConfigMap.Name)
		}
		dir, err := ct.tempDir("cni-configmap-")
		if err != nil {
			return "", err
		}
		for k, val := range l.ConfigMaps[i].Data {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(val), 0o644); err != nil {
				return "", err
			}
		}
		return dir, nil
	}
	return "", errors.New("unsupported volume source")
}

// Command is the container's command and arguments, as the runtime execs them.
func (ct *Container) Command() []string { return slices.Clone(ct.command) }

// Cmd returns the command that runs the container, after prefix (e.g. nsenter into a
// node's network namespace, for a hostNetwork pod): unshare gives it a private mount
// namespace (nothing is mounted on the machine), the script binds the volumes (recursively),
// /proc and /dev/null, then chroot execs the container's command, which keeps the process's PID.
func (ct *Container) Cmd(prefix ...string) *exec.Cmd {
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, m := range ct.mounts {
		dst := filepath.Join(ct.rootfs, m.target)
		// --rbind, as containerd binds a volume: what is mounted under the host path
		// (a pod's netns under /var/run/netns) comes with it.
		fmt.Fprintf(&script, "mount --rbind %q %q\n", m.source, dst)
		if m.readOnly {
			fmt.Fprintf(&script, "mount -o remount,bind,ro %q\n", dst)
		}
	}
	fmt.Fprintf(&script, "mount -t proc proc %q\n", filepath.Join(ct.rootfs, "proc"))
	fmt.Fprintf(&script, "mount --bind /dev/null %q\n", filepath.Join(ct.rootfs, "dev", "null"))
	fmt.Fprintf(&script, "exec chroot %q \"$@\"\n", ct.rootfs)
	argv := append(slices.Clone(prefix), "unshare", "--mount", "--propagation", "private", "sh", "-c", script.String(), "sh")
	cmd := exec.Command(argv[0], append(argv[1:], ct.command...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// Run runs the container to its end and returns what it printed.
func (ct *Container) Run(prefix ...string) (string, error) {
	out, err := ct.Cmd(prefix...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%v: %w:\n%s", ct.command, err, out)
	}
	return string(out), nil
}

// Close removes the directories made for the container.
func (ct *Container) Close() {
	for _, d := range ct.cleanup {
		os.RemoveAll(d)
	}
}
