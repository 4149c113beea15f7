package flannel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cnikit/cni/internal/core/statedir"
)

// The delegate config of each attachment is kept in <dataDir>/<containerID>, the
// reference's file, so that DEL runs the delegate with what ADD ran it with even after
// the subnet file changed or vanished (a node that re-leased its subnet). The skel has
// refused container ids that could hold a path separator.

// maxStored bounds what is read of a stored config.
const maxStored = 1 << 20

// tempPrefix starts the names of files being written; GC skips them.
const tempPrefix = "."

func storedPath(dataDir, containerID string) string {
	return filepath.Join(dataDir, containerID)
}

// writeStored puts data at path atomically: a temp file in the same directory, synced
// (the data dir is on disk, and DEL after a crash needs the content), then renamed over
// the name. The temp file is created exclusively (whatever a killed writer left under
// its name is removed first, never followed) and rename replaces a symlink at path
// instead of following it, so no symlink planted in the data dir redirects the write.
func writeStored(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := statedir.MkdirAll("dataDir", dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	tmpPath := tempPath(path)
	if err := os.Remove(tmpPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delegate config: %w", err)
	}
	tmp, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("delegate config: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmpPath, path)
	}
	if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		// A directory planted under the name: no config of ours (RemoveAll follows no
		// link), so it is replaced like anything else.
		if err = os.RemoveAll(path); err == nil {
			err = os.Rename(tmpPath, path)
		}
	}
	if err != nil {
		os.Remove(tmpPath)
		return fmt.Errorf("delegate config %s: %w", path, err)
	}
	return nil
}

// tempPath is where the config for path is written before its rename: a name of its
// own, so that DEL removes what an ADD killed half way through the write left.
func tempPath(path string) string {
	return filepath.Join(filepath.Dir(path), tempPrefix+filepath.Base(path)+".tmp")
}

// errUnusable marks a stored config that can never be run: a symlink (refused, never
// followed), not a regular file, too large, not a JSON object or without a type.
var errUnusable = errors.New("unusable delegate config")

// readStored returns the stored delegate config at path: its bytes and decoded form.
// A missing file gives fs.ErrNotExist, and so does a data dir that is no directory (a
// file, which ADD refuses, so nothing can be stored below it); one that can never be
// used, errUnusable.
func readStored(path string) ([]byte, map[string]any, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, nil, fmt.Errorf("%w %s: a symlink", errUnusable, path)
	}
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, fmt.Errorf("delegate config %s: %w (the data dir is no directory)", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w %s: not a regular file", errUnusable, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStored+1))
	if err != nil {
		return nil, nil, fmt.Errorf("delegate config %s: %w", path, err)
	}
	if len(data) > maxStored {
		return nil, nil, fmt.Errorf("%w %s: larger than %d bytes", errUnusable, path, maxStored)
	}
	conf, err := decodeObject(data)
	if err == nil {
		_, err = delegateType(conf)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w %s: %v", errUnusable, path, err)
	}
	return data, conf, nil
}

func decodeObject(data []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// removeStored deletes the stored config, and what a killed writer left of it, whatever
// was planted there (never what a link points to); one that is already gone, or that
// cannot be there because the data dir is no directory, is fine.
func removeStored(path string) error {
	var errs []error
	for _, p := range []string{path, tempPath(path)} {
		err := os.Remove(p)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			err = os.RemoveAll(p) // a directory planted under the name
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			errs = append(errs, fmt.Errorf("delegate config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// storedOf lists the container ids with a stored config of network in dataDir. A data
// dir that does not exist or is no directory holds none.
func storedOf(dataDir, network string) (map[string]map[string]any, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	out := map[string]map[string]any{}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		_, conf, err := readStored(filepath.Join(dataDir, e.Name()))
		if err != nil || conf["name"] != network {
			continue
		}
		out[e.Name()] = conf
	}
	return out, nil
}
