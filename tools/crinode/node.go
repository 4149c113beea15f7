// Package crinode runs Debian's containerd (1.6) as a Kubernetes node's runtime, inside
// private network, mount and PID namespaces that the caller's test or benchmark owns,
// and drives its CRI plugin as kubelet does (RunPodSandbox, StopPodSandbox,
// RemovePodSandbox over gRPC). The node's network namespace is the "host" the CNI
// plugins see: its bridge, veths, firewall rules and qdiscs vanish with it. Its own
// root, state, socket and config live in a directory of the caller; /run and /var/lib
// (netns files, the CNI result cache, IPAM state) are private tmpfs, so nothing a pod
// does reaches the machine. Nothing here is linked into cni.
package crinode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options describe one node.
type Options struct {
	// Dir holds the node's config, socket, logs, root and state; a short path, as the
	// socket's must fit 108 bytes.
	Dir string
	// BinDir is the CRI's CNI bin_dir, ConfList the network written into its conf_dir
	// (none: the node runs host-network pods only).
	BinDir   string
	ConfList []byte
	// Pause and PauseArchive are BuildPause's outputs.
	Pause, PauseArchive string
	// Binds are directories of the machine mounted in the node at paths of its own, as
	// a real node's disk holds /opt/cni/bin, /etc/cni/net.d and /var/lib/cni. With any
	// bind, the node's /etc is an overlay of the machine's (its writes land in Dir) and
	// its /opt a tmpfs, so that no target needs creating on the machine.
	Binds []Bind
	// ConfDir is the CRI's CNI conf_dir as the node sees it; empty: Dir/net.d, holding
	// ConfList.
	ConfDir string
	// Prepare runs once the node's namespaces exist and before containerd starts: what
	// a node does at boot before its runtime (its network link, its network daemon).
	Prepare func(*Node) error
	// CRIO, when set, runs CRI-O instead of containerd: the same CRI, another driver
	// of the CNI plugins (see crio.go).
	CRIO *CRIO
	// KeepRoot keeps containerd's root (its images, its sandboxes' metadata) across a
	// Close and a Start on the same Dir, as a node's disk keeps /var/lib/containerd
	// across a reboot; by default it is a tmpfs that goes with the node. Its state (the
	// /run/containerd of a node) goes either way.
	KeepRoot bool
}

// Bind mounts Source, a directory of the machine, at Target in the node.
type Bind struct{ Source, Target string }

// Node is a running containerd in its namespaces.
type Node struct {
	o      Options
	holder *exec.Cmd // unshare, whose child is the PID namespace's init
	// holderDone is closed when unshare has exited.
	holderDone chan struct{}
	init       int       // that init's PID, as the machine sees it
	ctrd       *exec.Cmd // nsenter running containerd
	ctrdLog    *os.File
	// crioRunc is the runc that CRIO.Runc runs.
	crioRunc string
	// CRI talks to the node's CRI plugin.
	CRI *Client
}

func runtimeArch() string { return runtime.GOARCH }

// Start creates the namespaces, starts containerd, imports the pause image and waits
// for the CRI to answer.
func Start(o Options) (_ *Node, err error) {
	// Resolved, as /proc/PID/exe names it: how the node finds its processes.
	if o.Pause, err = filepath.EvalSymlinks(o.Pause); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	if o.Pause, err = filepath.Abs(o.Pause); err != nil {
		return nil, err
	}
	if o.CRIO != nil {
		// The node's programs run through nsenter, from the node's root: absolute paths.
		c := *o.CRIO
		for _, p := range []*string{&c.Bin, &c.Pinns, &c.Load, &c.Runc} {
			if *p, err = filepath.Abs(*p); err != nil {
				return nil, err
			}
		}
		o.CRIO = &c
	}
	n := &Node{o: o}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	if err := n.writeConfig(); err != nil {
		return nil, err
	}
	if err := n.startHolder(); err != nil {
		return nil, err
	}
	if o.Prepare != nil {
		if err := o.Prepare(n); err != nil {
			return nil, err
		}
	}
	if o.CRIO != nil {
		// CRI-O needs its sandbox image in its store before it starts: it would pull it.
		if err := n.loadCRIOImage(); err != nil {
			return nil, err
		}
	}
	if err := n.startContainerd(); err != nil {
		return nil, err
	}
	if o.CRIO != nil {
		return n, nil
	}
	if out, err := exec.Command("ctr", "--address", n.socket(), "-n", "k8s.io", "images", "import", o.PauseArchive).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ctr images import: %w\n%s", err, out)
	}
	return n, nil
}

func (n *Node) socket() string {
	if n.o.CRIO != nil {
		return filepath.Join(n.o.Dir, "crio.sock")
	}
	return filepath.Join(n.o.Dir, "containerd.sock")
}

// logPath is the runtime's log, which also holds what the CNI plugins write on stderr.
func (n *Node) logPath() string {
	if n.o.CRIO != nil {
		return filepath.Join(n.o.Dir, "crio.log")
	}
	return filepath.Join(n.o.Dir, "containerd.log")
}

// Socket is the path of the runtime's CRI socket (containerd's or CRI-O's), as the
// machine and the node see it.
func (n *Node) Socket() string { return n.socket() }

// NetConfDir is the CRI's CNI conf_dir, as the node sees it.
func (n *Node) NetConfDir() string { return n.confDir() }

// BinDir is the CRI's CNI bin_dir, as the node sees it.
func (n *Node) BinDir() string { return n.o.BinDir }

// confDir is the CRI's conf_dir.
func (n *Node) confDir() string {
	if n.o.ConfDir != "" {
		return n.o.ConfDir
	}
	return filepath.Join(n.o.Dir, "net.d")
}

// writeConfig writes config.toml and the network config.
func (n *Node) writeConfig() error {
	confDir := n.confDir()
	for _, d := range []string{"root", "state", "opt", "net.d"} {
		if err := os.MkdirAll(filepath.Join(n.o.Dir, d), 0o755); err != nil {
			return err
		}
	}
	if n.o.ConfList != nil && n.o.ConfDir == "" {
		if err := os.WriteFile(filepath.Join(confDir, "10-net.conflist"), n.o.ConfList, 0o644); err != nil {
			return err
		}
	}
	if n.o.CRIO != nil {
		return n.writeCRIOConfig()
	}
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(n.o.Dir, "root"), filepath.Join(n.o.Dir, "state"), n.socket(), filepath.Join(n.o.Dir, "opt"),
		PauseImage, n.o.BinDir, confDir)
	return os.WriteFile(filepath.Join(n.o.Dir, "config.toml"), []byte(conf), 0o644)
}

// startHolder makes the namespaces: unshare's child mounts the private file systems
// and becomes pause, the PID namespace's init, which reaps the shims containerd leaves
// to it. Every process of the node dies with that init; it dies with unshare
// (--kill-child), which dies with this process (Pdeathsig).
func (n *Node) startHolder() error {
	root := fmt.Sprintf("mount -t tmpfs -o mode=711 tmpfs %q\n", filepath.Join(n.o.Dir, "root"))
	if n.o.KeepRoot {
		root = ""
	}
	script := fmt.Sprintf(`set -e
mount --make-rprivate /
mount -t proc proc /proc
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=755 tmpfs /var/lib
%smount -t tmpfs -o mode=711 tmpfs %q
%s%sip link set lo up
exec %q
`, root, filepath.Join(n.o.Dir, "state"), n.crioMounts(), n.bindScript(), n.o.Pause)
	n.holder = exec.Command("unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "sh", "-c", script)
	n.holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	n.holder.Stdout, n.holder.Stderr = &out, &out
	if err := n.holder.Start(); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	n.holderDone = make(chan struct{})
	go func() { n.holder.Wait(); close(n.holderDone) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if pid := onlyChild(n.holder.Process.Pid); pid > 0 && exe(pid) == n.o.Pause {
			n.init = pid
			return nil
		}
		select {
		case <-n.holderDone:
			return fmt.Errorf("the node's namespaces did not come up: %s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return errors.New("the node's namespaces did not come up in 10 s")
}

// bindScript mounts the node's binds: the private /etc and /opt first, then each
// source at its target, created inside the node.
func (n *Node) bindScript() string {
	if len(n.o.Binds) == 0 {
		return ""
	}
	var b strings.Builder
	upper, work := filepath.Join(n.o.Dir, "etc.upper"), filepath.Join(n.o.Dir, "etc.work")
	fmt.Fprintf(&b, "mkdir -p %q %q\n", upper, work)
	fmt.Fprintf(&b, "mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc\n", upper, work)
	b.WriteString("mount -t tmpfs -o mode=755 tmpfs /opt\n")
	for _, m := range n.o.Binds {
		fmt.Fprintf(&b, "mkdir -p %q\nmount --bind %q %q\n", m.Target, m.Source, m.Target)
	}
	return b.String()
}

// onlyChild is the one child of pid, or 0.
func onlyChild(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 1 {
		return 0
	}
	c, _ := strconv.Atoi(f[0])
	return c
}

func exe(pid int) string {
	p, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	return p
}

// startContainerd runs the node's runtime (containerd, or CRI-O with Options.CRIO) in
// the node's namespaces and waits for its CRI.
func (n *Node) startContainerd() error {
	if n.ctrdLog == nil {
		log, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		n.ctrdLog = log
	}
	argv := []string{"--target", strconv.Itoa(n.init), "--mount", "--pid", "--net", "--"}
	if n.o.CRIO != nil {
		n.ctrd = exec.Command("nsenter", append(argv, n.crioArgs()...)...)
		n.ctrd.Env = append(os.Environ(), n.crioEnv()...)
	} else {
		n.ctrd = exec.Command("nsenter", append(argv, "containerd", "--config", filepath.Join(n.o.Dir, "config.toml"))...)
	}
	n.ctrd.Stdout, n.ctrd.Stderr = n.ctrdLog, n.ctrdLog
	n.ctrd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.ctrd.Start(); err != nil {
		return fmt.Errorf("%s: %w", n.ctrd.Args[len(argv)+1], err)
	}
	exited := make(chan struct{})
	go func() { n.ctrd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("containerd exited: %s", n.LogTail())
		default:
		}
		if n.CRI == nil {
			if c, err := DialCRI(n.socket()); err == nil {
				c.cgroupParent = n.cgroupParent()
				n.CRI = c
			}
		}
		if n.CRI != nil && n.CRI.Ready() == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("containerd's CRI did not answer in 30 s: %s", n.LogTail())
}

// Restart stops containerd (SIGTERM, as systemd does) with the pods up, and starts it
// again on the same root and state: the shims and pods live on.
func (n *Node) Restart() error {
	if err := n.stopContainerd(); err != nil {
		return err
	}
	return n.startContainerd()
}

// Crash kills containerd (SIGKILL: whatever RPC it was serving ends there, as in a
// crash or an OOM kill) and starts it again on the same root and state, as systemd
// restarts it.
func (n *Node) Crash() error {
	if n.ctrd == nil || n.ctrd.Process == nil {
		return errors.New("containerd is not running")
	}
	pid := onlyChild(n.ctrd.Process.Pid)
	if pid == 0 {
		return errors.New("containerd's process not found under nsenter")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill containerd: %w", err)
	}
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(20 * time.Millisecond)
	}
	n.ctrd = nil
	return n.startContainerd()
}

func (n *Node) stopContainerd() error {
	if n.ctrd == nil || n.ctrd.Process == nil {
		return nil
	}
	pid := onlyChild(n.ctrd.Process.Pid)
	if pid == 0 {
		return errors.New("containerd's process not found under nsenter")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop containerd: %w", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n.ctrd = nil
	return nil
}

// Log is the runtime's log, where it also writes what the CNI plugins say on stderr.
func (n *Node) Log() string {
	data, _ := os.ReadFile(n.logPath())
	return string(data)
}

// LogTail is the end of containerd's log, for failure messages.
func (n *Node) LogTail() string {
	l := n.Log()
	return l[max(0, len(l)-6000):]
}

// Close kills the node: every process in its PID namespace, and with them its network
// and mount namespaces.
func (n *Node) Close() {
	if n.CRI != nil {
		n.CRI.Close()
	}
	if n.init > 0 {
		syscall.Kill(n.init, syscall.SIGKILL)
	}
	if n.holderDone != nil {
		n.holder.Process.Kill()
		<-n.holderDone
	}
	if n.ctrd != nil && n.ctrd.Process != nil {
		n.ctrd.Process.Kill()
	}
	if n.ctrdLog != nil {
		n.ctrdLog.Close()
	}
	if n.init > 0 {
		removeCgroups(n.cgroupParent())
	}
}

// cgroupParent is the cgroup, in every hierarchy, that holds the node's sandboxes. The
// cgroup file system is the machine's: Close removes it.
func (n *Node) cgroupParent() string { return fmt.Sprintf("/cni-e2e-%d", n.init) }

// removeCgroups removes the cgroup dir under every hierarchy of /sys/fs/cgroup, children
// first, waiting a moment for the processes the kernel is still killing.
func removeCgroups(parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		dir := filepath.Join(root, parent)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			for try := 0; try < 100 && os.Remove(dirs[i]) != nil; try++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// Pid is the node's init as the machine sees it: ip link ... netns takes it.
func (n *Node) Pid() int { return n.init }

// NetNS is the path of the node's network namespace.
func (n *Node) NetNS() string { return fmt.Sprintf("/proc/%d/ns/net", n.init) }

// Path is p as the node sees it (its private /run and /var/lib included).
func (n *Node) Path(p string) string { return fmt.Sprintf("/proc/%d/root%s", n.init, p) }

// Run runs a command in the node's network, mount and PID namespaces (ip,
// iptables-save, nft, cni) and returns its output. The PID namespace too: the node's
// /proc is its PID namespace's, where a process from outside finds no /proc/self.
func (n *Node) Run(name string, args ...string) (string, error) {
	return n.nsenter([]string{"--mount", "--pid", "--net"}, name, args...)
}

// Qdiscs is `tc qdisc show` of the node. tc runs in the node's network namespace only:
// in its mount namespace, whose /proc is the node's PID namespace's, tc's own
// /proc/self (and so /proc/net/psched) does not exist, and tc then prints every burst
// and latency off by the kernel's ticks per microsecond (a 34359737-byte burst as
// 512Mb).
func (n *Node) Qdiscs() (string, error) {
	return n.nsenter([]string{"--net"}, "tc", "qdisc", "show")
}

func (n *Node) nsenter(namespaces []string, name string, args ...string) (string, error) {
	argv := append(append([]string{"--target", strconv.Itoa(n.init)}, namespaces...), "--", name)
	cmd := exec.Command("nsenter", append(argv, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
