package chain

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// DefaultCacheDir is libcni's cache directory; results live in its "results" subdir.
const DefaultCacheDir = "/var/lib/cni"

// cacheKind marks libcni's current cache format.
const cacheKind = "cniCacheV1"

// cacheEntry is one cached attachment in libcni's cniCacheV1 format, so that libcni and
// this runner can each CHECK and DEL what the other ADDed. Config is the whole list
// configuration (base64 on disk, as Go encodes []byte).
type cacheEntry struct {
	Kind           string          `json:"kind"`
	ContainerID    string          `json:"containerId"`
	Config         []byte          `json:"config"`
	IfName         string          `json:"ifName"`
	NetworkName    string          `json:"networkName"`
	Netns          string          `json:"netns,omitempty"`
	CNIArgs        [][2]string     `json:"cniArgs,omitempty"`
	CapabilityArgs map[string]any  `json:"capabilityArgs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

func (r *Runner) cacheDir() string { return cmp.Or(r.CacheDir, DefaultCacheDir) }

// cacheName is libcni's entry name in <cacheDir>/results: <network>-<containerID>-<ifname>.
func cacheName(network string, att *Attachment) string {
	return network + "-" + att.ContainerID + "-" + att.IfName
}

// checkCacheName refuses, before any plugin runs, an attachment whose cache entry
// name the kernel would refuse: libcni finds out only when writing the cache, after
// every plugin of the ADD succeeded.
func checkCacheName(network string, att *Attachment) error {
	if n := len(cacheName(network, att)); n > nameMax {
		return cnierror.Newf(cnierror.CodeInvalidEnv,
			"containerID of %d bytes is too long for network %q and interface %q: the cache entry <network>-<containerID>-<ifname> would be %d bytes, the limit is %d",
			len(att.ContainerID), network, att.IfName, n, nameMax)
	}
	return nil
}

// writeCache stores the final ADD result. The entry is written to a temporary file and
// renamed (see results.write), so a crash of the process leaves the old entry or the
// new one, never an empty file (libcni writes in place; an empty entry then breaks its
// CHECK), and the next DEL or GC removes the temporary file.
func (r *Runner) writeCache(n *Network, att *Attachment, res *result.Result) error {
	raw, err := json.Marshal(res)
	if err != nil {
		return err
	}
	data, err := json.Marshal(&cacheEntry{
		Kind: cacheKind, ContainerID: att.ContainerID, Config: n.Bytes, IfName: att.IfName,
		NetworkName: n.Name, Netns: att.Netns, CNIArgs: att.Args, CapabilityArgs: att.CapabilityArgs, Result: raw,
	})
	if err != nil {
		return err
	}
	dir, err := openResults(r.cacheDir(), true)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.write(cacheName(n.Name, att), data, r.cacheWritten)
}

// cachedResult is Runner.CachedResult in the open results directory.
func (dir *results) cachedResult(n *Network, att *Attachment) (*result.Result, error) {
	data, err := dir.read(cacheName(n.Name, att))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	raw := json.RawMessage(data)
	var e cacheEntry
	if json.Unmarshal(data, &e) == nil && e.Kind == cacheKind {
		if len(e.Result) == 0 || string(e.Result) == "null" {
			return nil, nil
		}
		raw = e.Result
	}
	res, err := result.Parse(raw, "")
	if err != nil {
		return nil, fmt.Errorf("cached result of network %q: %w", n.Name, err)
	}
	conv, err := res.Convert(n.CNIVersion)
	if err != nil {
		return nil, fmt.Errorf("converting cached result of network %q to config version %q: %w", n.Name, n.CNIVersion, err)
	}
	return conv, nil
}

// CachedResult returns the result cached by the last ADD of the attachment, converted to
// the config's version, or nil when nothing is cached. Like libcni it also reads the
// legacy format, a bare result. An entry that is there but cannot be used (a symlink, a
// FIFO, larger than MaxFileSize, not a result) is an error.
func (r *Runner) CachedResult(n *Network, att Attachment) (*result.Result, error) {
	dir, err := openResults(r.cacheDir(), false)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return dir.cachedResult(n, &att)
}

// CachedAttachment is an attachment recorded in the result cache.
type CachedAttachment struct {
	Network string
	Attachment
	// file is the entry's name in results/, which a hand-made entry may have other
	// than cacheName says.
	file string
}

// CachedAttachments lists the cache in sorted order, skipping entries that are not
// cniCacheV1 or lack a network or interface name, as libcni does. It reads regular
// files only, never through a symlink, and skips names starting with "." (no entry
// name does: they are temporary files). A non-empty containerID keeps only that
// container's entries.
func (r *Runner) CachedAttachments(containerID string) ([]CachedAttachment, error) {
	dir, err := openResults(r.cacheDir(), false)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return cachedAttachments(dir, containerID)
}

func cachedAttachments(dir *results, containerID string) ([]CachedAttachment, error) {
	names, err := dir.names()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var out []CachedAttachment
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		data, err := dir.read(name)
		if err != nil {
			continue
		}
		var e cacheEntry
		if json.Unmarshal(data, &e) != nil || e.Kind != cacheKind || e.IfName == "" || e.NetworkName == "" {
			continue
		}
		if containerID != "" && e.ContainerID != containerID {
			continue
		}
		out = append(out, CachedAttachment{Network: e.NetworkName, file: name, Attachment: Attachment{
			ContainerID: e.ContainerID, Netns: e.Netns, IfName: e.IfName, Args: e.CNIArgs, CapabilityArgs: e.CapabilityArgs,
		}})
	}
	return out, nil
}
