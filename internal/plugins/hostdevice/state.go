package hostdevice

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// saved is what a device looked like in the host before ADD moved it, kept in
// <dataDir>/<containerID>:<ifname>.json until DEL has put it back. The separator is one
// the kernel refuses in interface names: with '_', which both may contain, container
// "a_b" with "c" and container "a" with "b_c" would share a file. The attachment is
// recorded inside as well, for GC.
type saved struct {
	Network     string `json:"network"`
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifName"`
	// Name is the device's name in the host (also kept in its alias, as the reference
	// does, so a reference DEL can still bring it back).
	Name string `json:"name"`
	MAC  string `json:"mac,omitempty"`
	MTU  int    `json:"mtu"`
	Up   bool   `json:"up"`
}

func statePath(dataDir, containerID, ifName string) string {
	return filepath.Join(dataDir, containerID+":"+ifName+".json")
}

// readState returns the state at path, nil when there is none. A file that cannot be
// parsed is reported and treated as absent, so that it cannot make every later DEL fail.
func readState(path string) (*saved, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host-device state: %w", err)
	}
	var s saved
	if err := json.Unmarshal(data, &s); err != nil || s.Name == "" {
		return nil, fmt.Errorf("host-device state %s: unreadable, ignored: %v", path, err)
	}
	return &s, nil
}

// writeState writes s through a temp file and a rename, so a crash never leaves half a
// file for DEL.
func writeState(path string, s *saved) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("host-device state: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("host-device state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("host-device state: %w", err)
	}
	_, werr := tmp.Write(data)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("host-device state %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("host-device state %s: %w", path, err)
	}
	return nil
}

func removeState(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("host-device state: %w", err)
	}
	return nil
}

// listStates returns every state file of the network in dataDir, by path.
func listStates(dataDir, network string) (map[string]*saved, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host-device state: %w", err)
	}
	out := map[string]*saved{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dataDir, e.Name())
		s, err := readState(path)
		if err != nil || s == nil || s.Network != network {
			continue
		}
		out[path] = s
	}
	return out, nil
}
