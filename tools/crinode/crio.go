package crinode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// CRIO names the programs a CRI-O node runs, built by make (bin/crio, bin/pinns,
// bin/crio-load from tools/crio at the version its go.mod pins). conmon and runc are
// Debian's, found on PATH.
type CRIO struct {
	// Bin is crio, Pinns its namespace pinning helper, Load the program that writes
	// the pause image into CRI-O's store (tools/crio/cmd/crio-load), Runc the runtime
	// CRI-O runs: runc with containerd's restrict_oom_score_adj
	// (tools/crio/cmd/crio-runc).
	Bin, Pinns, Load, Runc string
}

// crioConfPath is crio.conf. CRI-O's store root is Dir/root (a tmpfs unless KeepRoot,
// as containerd's), its run root and every run-time dir under Dir/state or the
// node's /run (always tmpfs).
func (n *Node) crioConfPath() string { return filepath.Join(n.o.Dir, "crio.conf") }

// crioMounts hides, for a CRI-O node, what containers/image and containers/storage
// write outside the dirs its config names: /var/tmp (big files), /var/log (CRI-O's
// default pod log dir). /var/lib (their blob-info cache, /var/lib/containers) and /run
// are private tmpfs already.
func (n *Node) crioMounts() string {
	if n.o.CRIO == nil {
		return ""
	}
	return "mount -t tmpfs -o mode=1777 tmpfs /var/tmp\nmount -t tmpfs -o mode=755 tmpfs /var/log\n"
}

// crioArgs is CRI-O's command line: its config, and an empty drop-in dir, so that no
// /etc/crio of the machine is read.
func (n *Node) crioArgs() []string {
	return []string{n.o.CRIO.Bin, "--config", n.crioConfPath(), "--config-dir", filepath.Join(n.o.Dir, "crio.conf.d")}
}

// crioEnv points containers/image and containers/storage at the node's own registries
// and storage configs instead of /etc/containers.
func (n *Node) crioEnv() []string {
	return []string{
		"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(n.o.Dir, "registries.conf"),
		"CONTAINERS_STORAGE_CONF=" + filepath.Join(n.o.Dir, "storage.conf"),
		"CRIO_RUNC=" + n.crioRunc,
	}
}

// writeCRIOConfig writes crio.conf and what it names: the signature policy (accept
// anything: the one image is local), an empty registries.conf, a storage.conf with
// the same store as crio.conf.
func (n *Node) writeCRIOConfig() error {
	d := n.o.Dir
	state := filepath.Join(d, "state")
	for _, dir := range []string{"crio.conf.d", "hooks", "tmp"} {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o755); err != nil {
			return err
		}
	}
	root, runroot := filepath.Join(d, "root"), filepath.Join(state, "storage")
	// Debian installs runc in /usr/sbin, which a test's PATH may lack.
	runc, err := exec.LookPath("runc")
	if err != nil {
		if runc, err = exec.LookPath("/usr/sbin/runc"); err != nil {
			return fmt.Errorf("CRI-O's runtime: %w", err)
		}
	}
	n.crioRunc = runc
	conmon, err := exec.LookPath("conmon")
	if err != nil {
		return fmt.Errorf("CRI-O's monitor: %w", err)
	}
	files := map[string]string{
		"policy.json":     `{"default":[{"type":"insecureAcceptAnything"}]}`,
		"registries.conf": "unqualified-search-registries = []\n",
		"storage.conf":    fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n", root, runroot),
	}
	// The CNI settings as a node's: one conf dir, one plugin dir; CRI-O watches both.
	// Host ports are CRI-O's own (disable_hostport_mapping = false, its default).
	files["crio.conf"] = fmt.Sprintf(`[crio]
root = %q
runroot = %q
storage_driver = "vfs"
log_dir = %q
version_file = %q
version_file_persist = %q
clean_shutdown_file = %q
[crio.api]
listen = %q
stream_address = "127.0.0.1"
stream_port = "0"
[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
pinns_path = %q
namespaces_dir = "/run"
container_exits_dir = "/run/crio/exits"
container_attach_socket_dir = "/run/crio"
hooks_dir = [%q]
default_mounts_file = ""
seccomp_profile = ""
apparmor_profile = ""
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
drop_infra_ctr = false
log_to_journald = false
disable_hostport_mapping = false
[crio.runtime.runtimes.runc]
runtime_path = %q
runtime_type = "oci"
runtime_root = "/run/runc"
monitor_path = %q
monitor_cgroup = "pod"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CRIO_RUNC=%s"]
[crio.image]
pause_image = %q
pause_command = "/pause"
signature_policy = %q
big_files_temporary_dir = %q
[crio.network]
network_dir = %q
plugin_dirs = [%q]
[crio.metrics]
enable_metrics = false
[crio.nri]
enable_nri = false
`, root, runroot, filepath.Join(state, "pod-logs"), filepath.Join(state, "version"),
		filepath.Join(d, "root", "version"), filepath.Join(d, "root", "clean.shutdown"),
		n.socket(), n.o.CRIO.Pinns, filepath.Join(d, "hooks"), n.o.CRIO.Runc, conmon, runc, PauseImage,
		filepath.Join(d, "policy.json"), filepath.Join(d, "tmp"), n.confDir(), n.o.BinDir)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loadCRIOImage writes the pause image into CRI-O's store, inside the node (whose
// tmpfs the store lives on), unless a kept root has it already.
func (n *Node) loadCRIOImage() error {
	root, runroot := filepath.Join(n.o.Dir, "root"), filepath.Join(n.o.Dir, "state", "storage")
	_, err := n.Run(n.o.CRIO.Load, "-root", root, "-runroot", runroot, "-driver", "vfs",
		"-archive", n.o.PauseArchive, "-name", PauseImage, "-tmp", filepath.Join(n.o.Dir, "tmp"))
	if err != nil {
		return fmt.Errorf("load the pause image into CRI-O's store: %w", err)
	}
	return nil
}
