package portmap

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnikit/cni/internal/spec/skel"
)

// defaultCacheDir is libcni's cache directory, which the runtimes built on it (containerd,
// CRI-O, Nomad, our own runner) keep their results in, under results/: one entry per
// live attachment, named <network>-<containerID>-<ifname>, written after ADD and removed
// by DEL or GC. Runtimes do not tell plugins where it is; CNI_CACHE_DIR in the plugin's
// environment (the variable the cni CLI and cnitool read) overrides it.
const defaultCacheDir = "/var/lib/cni"

// liveness answers whether a container the reference's rules name may still be alive,
// from the runtime's result cache.
type liveness struct {
	// dir is the results directory read.
	dir string
	// names are its entries; nil when it could not be read, and then every container
	// counts as alive.
	names []string
}

// readLiveness lists the result cache named by the invocation's environment. The entries'
// names are enough: one directory read, no entry opened, so a planted entry can at most
// keep a stale rule (a leak), never have a live one removed.
func readLiveness(req *skel.Request) liveness {
	dir := defaultCacheDir
	for _, kv := range req.Args.Env {
		if v, ok := strings.CutPrefix(kv, "CNI_CACHE_DIR="); ok && v != "" {
			dir = v
		}
	}
	l := liveness{dir: filepath.Join(dir, "results")}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return l
	}
	l.names = make([]string, 0, len(entries))
	for _, e := range entries {
		l.names = append(l.names, e.Name())
	}
	return l
}

// gone tells whether the container cid provably holds no attachment: the cache was read
// and no entry's name holds "-<cid>-". Network names and interface names may hold dashes
// too, so a name can match a container it is not of; that only keeps a rule. why says,
// for the log, what was found.
func (l liveness) gone(cid string) (ok bool, why string) {
	if l.names == nil {
		return false, fmt.Sprintf("the result cache %s cannot be read, so nothing proves container %s gone", l.dir, cid)
	}
	for _, n := range l.names {
		if strings.Contains(n, "-"+cid+"-") {
			return false, fmt.Sprintf("container %s is alive: the result cache holds %s", cid, filepath.Join(l.dir, n))
		}
	}
	return true, fmt.Sprintf("no entry of the result cache %s names container %s", l.dir, cid)
}
