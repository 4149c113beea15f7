package portmap

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/spec/skel"
)

// defaultCacheDir is libcni's cache directory, which the runtimes built on it (containerd,
// CRI-O, Nomad, our own runner) keep their results in, under results/: one entry per
// attachment, named <network>-<containerID>-<ifname>, written after ADD and removed by
// DEL or GC. Runtimes do not tell plugins where it is; CNI_CACHE_DIR in the plugin's
// environment (the variable the cni CLI and cnitool read) overrides it.
const defaultCacheDir = "/var/lib/cni"

// maxCacheEntry bounds the read of one cache entry (a result and the network's config).
const maxCacheEntry = 1 << 20

// liveness answers whether a container the reference's rules name may still be alive,
// from the runtime's result cache and the network namespaces its entries name.
type liveness struct {
	// dir is the results directory; nil when it could not be opened, and then every
	// container counts as alive.
	dir  *statedir.Dir
	path string
	// names are its entries.
	names []string
	// own is the network namespace of the ADD's pod.
	own unix.Stat_t
}

// readLiveness lists the result cache named by the invocation's environment. Only the
// entries whose name can be the container's are read later, through statedir (no link
// followed, bounded): a planted entry can at most keep a stale rule, never have a live
// one removed. The caller closes it.
func readLiveness(req *skel.Request) *liveness {
	dir := defaultCacheDir
	for _, kv := range req.Args.Env {
		if v, ok := strings.CutPrefix(kv, "CNI_CACHE_DIR="); ok && v != "" {
			dir = v
		}
	}
	l := &liveness{path: filepath.Join(dir, "results")}
	_ = unix.Stat(req.Args.Netns, &l.own)
	d, err := statedir.Open(l.path)
	if err != nil {
		return l
	}
	if l.names, err = d.Names(); err != nil {
		d.Close()
		return l
	}
	l.dir = d
	return l
}

func (l *liveness) close() {
	if l.dir != nil {
		l.dir.Close()
	}
}

// gone tells whether the container cid provably holds no attachment: the cache was
// read, and every entry of the container names a network namespace that no longer
// exists, or the ADD's own pod's (a path of a pod that is gone can be reused for the
// next one, /proc/<pid>/... above all). why says, for the log, what was found.
func (l *liveness) gone(cid string) (ok bool, why string) {
	if l.dir == nil {
		return false, fmt.Sprintf("the result cache %s cannot be read, so nothing proves container %s gone", l.path, cid)
	}
	var dead []string
	for _, n := range l.names {
		// Network names and interface names may hold dashes too: the entry itself says
		// whose it is.
		if !strings.Contains(n, "-"+cid+"-") {
			continue
		}
		alive, why := l.entryAlive(n, cid)
		if alive {
			return false, fmt.Sprintf("container %s is alive: %s", cid, why)
		}
		if why != "" {
			dead = append(dead, why)
		}
	}
	if len(dead) > 0 {
		return true, fmt.Sprintf("container %s is gone: %s", cid, strings.Join(dead, "; "))
	}
	return true, fmt.Sprintf("no entry of the result cache %s names container %s", l.path, cid)
}

// entryAlive tells whether the cache entry name shows the container cid alive; why
// says what it found ("" for an entry of another container).
func (l *liveness) entryAlive(name, cid string) (bool, string) {
	path := filepath.Join(l.path, name)
	data, err := l.dir.ReadFile(name, maxCacheEntry)
	if err != nil {
		return true, fmt.Sprintf("its cache entry %s cannot be read (%v)", path, err)
	}
	var e struct {
		ContainerID string `json:"containerId"`
		Netns       string `json:"netns"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return true, fmt.Sprintf("its cache entry %s cannot be parsed (%v)", path, err)
	}
	switch {
	case e.ContainerID != cid:
		return false, ""
	case e.Netns == "":
		return true, fmt.Sprintf("the result cache holds %s, which names no network namespace", path)
	}
	var st unix.Stat_t
	var fs unix.Statfs_t
	if unix.Statfs(e.Netns, &fs) != nil || fs.Type != unix.NSFS_MAGIC || unix.Stat(e.Netns, &st) != nil {
		return false, fmt.Sprintf("its cache entry %s names network namespace %s, which no longer exists", path, e.Netns)
	}
	if st.Dev == l.own.Dev && st.Ino == l.own.Ino {
		return false, fmt.Sprintf("its cache entry %s names network namespace %s, now the new pod's", path, e.Netns)
	}
	return true, fmt.Sprintf("the result cache holds %s, whose network namespace %s exists", path, e.Netns)
}
