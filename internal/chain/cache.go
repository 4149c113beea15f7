package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

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

func (r *Runner) cacheDir() string {
	if r.CacheDir == "" {
		return DefaultCacheDir
	}
	return r.CacheDir
}

// cachePath is libcni's <cacheDir>/results/<network>-<containerID>-<ifname>.
func (r *Runner) cachePath(network string, att *Attachment) string {
	return filepath.Join(r.cacheDir(), "results", network+"-"+att.ContainerID+"-"+att.IfName)
}

// writeCache stores the final ADD result. The file is written to a temporary name,
// synced and renamed, so a crash leaves the old entry or the new one, never an empty
// file (libcni writes in place; an empty entry then breaks its CHECK).
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
	path := r.cachePath(n.Name, att)
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (r *Runner) removeCache(network string, att *Attachment) error {
	err := os.Remove(r.cachePath(network, att))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// cachedResult returns the cached ADD result converted to the config's version, or nil
// when nothing is cached. Like libcni it also reads the legacy format, a bare result.
func (r *Runner) cachedResult(n *Network, att *Attachment) (*result.Result, error) {
	data, err := os.ReadFile(r.cachePath(n.Name, att))
	if err != nil {
		return nil, nil // as libcni: an unreadable cache is no cache
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
// the network's version, or nil when none is cached.
func (r *Runner) CachedResult(n *Network, att Attachment) (*result.Result, error) {
	return r.cachedResult(n, &att)
}

// CachedAttachment is an attachment recorded in the result cache.
type CachedAttachment struct {
	Network string
	Attachment
}

// CachedAttachments lists the cache in sorted order, skipping entries that are not
// cniCacheV1 or lack a network or interface name, as libcni does. A non-empty
// containerID keeps only that container's entries.
func (r *Runner) CachedAttachments(containerID string) ([]CachedAttachment, error) {
	dir := filepath.Join(r.cacheDir(), "results")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	var out []CachedAttachment
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
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
		out = append(out, CachedAttachment{Network: e.NetworkName, Attachment: Attachment{
			ContainerID: e.ContainerID, Netns: e.Netns, IfName: e.IfName, Args: e.CNIArgs, CapabilityArgs: e.CapabilityArgs,
		}})
	}
	return out, nil
}
