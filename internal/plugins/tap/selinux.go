package tap

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/panics"
	"github.com/cnikit/cni/internal/host/link"
)

// CreatorName is the executable name under which the cni binary creates one tap and
// exits. A tap carries the SELinux label of the process that created it, and a VM
// process confined to selinuxContext may only attach to a tap of its own label; so with
// selinuxContext the plugin sets that context as its exec label and execs itself under
// this name to create the tap, as the reference execs `ip tuntap` (never `ip` here).
const CreatorName = "cni-tap-creator"

// RunCreator is the creator process: args are a tapSpec's args. It makes the tap in the
// netns it was started in and reports failure on stderr with exit status 1.
func RunCreator(args []string, stderr io.Writer) int {
	spec, err := parseSpec(args)
	if err == nil {
		err = spec.create()
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", CreatorName, err)
		return 1
	}
	return 0
}

// selinuxMagic is the file system type of selinuxfs (SELINUX_MAGIC).
const selinuxMagic = 0xf97cff8c

// selinuxEnabled reports whether SELinux runs: selinuxfs is mounted where libselinux
// looks for it. Elsewhere /proc/thread-self/attr/exec may belong to another LSM
// (AppArmor reads profile names from it), so nothing is written there.
func selinuxEnabled() bool {
	var fs unix.Statfs_t
	return unix.Statfs("/sys/fs/selinux", &fs) == nil && uint32(fs.Type) == selinuxMagic
}

// createLabelled has the creator, exec'd from bin with the exec label set to label
// ("" keeps the caller's), make the tap inside cont. It runs on a thread of its own
// that enters cont, sets the label and is never returned to the pool: the thread, its
// namespace and its exec label end with the goroutine.
func createLabelled(bin, label string, cont *link.NS, spec tapSpec) error {
	return <-panics.Go(func() error {
		runtime.LockOSThread()
		return execCreator(bin, label, cont, spec)
	})
}

func execCreator(bin, label string, cont *link.NS, spec tapSpec) error {
	if err := netns.Set(netns.NsHandle(cont.Fd())); err != nil {
		return fmt.Errorf("enter container netns: %w", err)
	}
	if label != "" {
		if err := setExecLabel(label); err != nil {
			return fmt.Errorf("selinuxContext: set exec label %q: %w", label, err)
		}
	}
	cmd := exec.Command(bin, spec.args()...)
	cmd.Args[0] = CreatorName
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("tap %q: creator: %v: %s", spec.Name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// setExecLabel sets the SELinux context the calling thread's next exec runs in, as
// libselinux's setexeccon does (a plain write: /proc attribute files take no O_TRUNC).
func setExecLabel(label string) error {
	f, err := openThreadAttr("/proc", "exec")
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(label))
	return errors.Join(werr, f.Close())
}

// openThreadAttr opens the calling thread's LSM attribute file attr under procRoot for
// writing, and only if it is procfs's own: procRoot must be a procfs mount, and the
// path to the file may cross no mount point and no magic link, so a file mounted over
// it or a /proc that is something else is refused rather than written to (what
// go-selinux 1.13.0 hardened for CVE-2025-52881, upstream row P23).
func openThreadAttr(procRoot, attr string) (*os.File, error) {
	root, err := unix.Open(procRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", procRoot, err)
	}
	defer unix.Close(root)
	if err := isProcfs(root, procRoot); err != nil {
		return nil, err
	}
	path := fmt.Sprintf("thread-self/attr/%s", attr)
	fd, err := unix.Openat2(root, path, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.6 (EL8) have no openat2: the file system check below is
		// what is left of the protection there.
		fd, err = unix.Openat(root, path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", procRoot, path, err)
	}
	if err := isProcfs(fd, procRoot+"/"+path); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), procRoot+"/"+path), nil
}

func isProcfs(fd int, name string) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("statfs %s: %w", name, err)
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%s is not on procfs (file system type %#x)", name, fs.Type)
	}
	return nil
}
