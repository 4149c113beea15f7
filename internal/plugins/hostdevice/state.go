package hostdevice

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/ifname"
	"github.com/cnikit/cni/internal/core/statedir"
	"github.com/cnikit/cni/internal/host/owner"
	"github.com/cnikit/cni/internal/spec/skel"
)

// saved is what a device looked like in the host before ADD moved it, kept in
// <dataDir>/<containerID>:<ifname>.json until DEL has put it back. The separator is one
// the kernel refuses in interface names: with '_', which both may contain, container
// "a_b" with "c" and container "a" with "b_c" would share a file. The attachment is
// recorded inside as well, for GC.
//
// A state file is input like any other (it may be planted or forged): it only says
// what to put back, never which link to act on. That link must prove to be the device
// ADD moved (see isDevice).
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
	// PermMAC is the device's permanent hardware address (a physical NIC's, which no
	// MAC change touches); Index its interface index in the host before the move and
	// ContainerIndex the one it got in the container. One of them must match, beside
	// the alias, before DEL or GC acts on a link.
	PermMAC        string `json:"permMAC,omitempty"`
	Index          int    `json:"index,omitempty"`
	ContainerIndex int    `json:"containerIndex,omitempty"`
	// Device is the device's path below /sys/devices/ ("" for a virtual device, which
	// dies with its netns): a physical device comes back to the host when its netns
	// dies, so its state is kept for as long as the hardware is there and the device
	// has not been seen back.
	Device string `json:"device,omitempty"`
}

// maxState bounds what is read of a state file: a real one is a few hundred bytes.
const maxState = 16 << 10

// stateName is the state file's name for the attachment. A name longer than a file
// name may be (with tempName's additions) names the container by its hash (no container
// id holds a colon, so the hashed form is no real id); the file holds the id itself.
func stateName(containerID, ifName string) string {
	name := containerID + ":" + ifName + ".json"
	if len(tempName(name)) > unix.NAME_MAX {
		name = owner.Hashed(containerID) + ":" + ifName + ".json"
	}
	return name
}

// tempName is the name the state called name is written under before its rename: one
// of its own, so that DEL removes what an ADD killed half way through the write left,
// and starting with a dot, so that listings skip it.
func tempName(name string) string { return "." + name + ".tmp" }

// store is the data dir, reached through statedir: no name in it is followed when it
// is a symbolic link, only regular files are read, and reads are bounded, so a FIFO,
// a link to /dev/zero or a huge file planted under a state's name cannot hang or
// exhaust DEL and GC. A nil store is a data dir that does not exist: it holds nothing.
type store struct {
	dir *statedir.Dir
}

// openStore opens the data dir at path, for ADD creating it first. For DEL and GC a
// missing one, a path that is no directory, or none at all ("") holds no state: nil
// and no error. For
// ADD a path that is no directory is the config's fault (code 7 naming dataDir).
func openStore(path string, create bool) (*store, error) {
	if path == "" {
		return nil, nil
	}
	if create {
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, dataDirError(path, err)
		}
	}
	d, err := statedir.Open(path)
	switch {
	case err == nil:
		return &store{dir: d}, nil
	case !create && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)):
		return nil, nil
	case create:
		return nil, dataDirError(path, err)
	}
	return nil, fmt.Errorf("host-device state: %w", err)
}

func dataDirError(path string, err error) error {
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EEXIST) {
		return cnierror.Invalid("dataDir: %q is not a directory", path)
	}
	return fmt.Errorf("host-device state dir: %w", err)
}

func (s *store) Close() {
	if s != nil {
		s.dir.Close()
	}
}

// read returns the state called name, nil when there is none. Anything but a readable,
// well-formed state file under that name is reported and treated as absent, so that it
// can neither hang nor fail every later DEL.
func (s *store) read(name string) (*saved, error) {
	if s == nil {
		return nil, nil
	}
	data, err := s.dir.ReadFile(name, maxState)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("host-device state %s: ignored: %w", name, err)
	}
	var st saved
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("host-device state %s: unreadable, ignored: %v", name, err)
	}
	if err := st.validate(); err != nil {
		return nil, fmt.Errorf("host-device state %s: ignored: %v", name, err)
	}
	return &st, nil
}

// validate checks that every value is one ADD could have written.
func (st *saved) validate() error {
	if err := ifname.Check(st.Name); err != nil {
		return fmt.Errorf("name: %v", err)
	}
	if err := ifname.Check(st.IfName); err != nil {
		return fmt.Errorf("ifName: %v", err)
	}
	if err := skel.ValidateContainerID(st.ContainerID); err != nil {
		return fmt.Errorf("containerID: %v", err)
	}
	if st.MTU < 0 || st.MTU > 65535 || st.Index < 0 || st.ContainerIndex < 0 {
		return errors.New("mtu or index out of range")
	}
	for _, mac := range []string{st.MAC, st.PermMAC} {
		if mac != "" && parseMAC(mac) == nil {
			return fmt.Errorf("%q is no MAC address", mac)
		}
	}
	if st.Device != "" && !strings.HasPrefix(st.Device, "/sys/devices/") || strings.Contains(st.Device, "..") {
		return fmt.Errorf("device %q is not below /sys/devices/", st.Device)
	}
	return nil
}

// write puts st under name through a temp file and a rename, so a crash never leaves
// half a file for DEL, and whatever was planted under name is replaced, not written
// through.
func (s *store) write(name string, st *saved) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("host-device state: %w", err)
	}
	tmp := tempName(name)
	if err := s.writeNew(tmp, data); err != nil {
		return fmt.Errorf("host-device state: %w", err)
	}
	err = s.dir.Rename(tmp, name)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		// A directory planted under the name: no state of ours, so it goes (never
		// through a link: statedir removes without following).
		if err = s.dir.RemoveAll(name); err == nil {
			err = s.dir.Rename(tmp, name)
		}
	}
	if err != nil {
		s.dir.Unlink(tmp)
		return fmt.Errorf("host-device state: %w", err)
	}
	return nil
}

// writeNew writes data to a new file called tmp, replacing whatever an earlier writer
// left under that name (never writing through it).
func (s *store) writeNew(tmp string, data []byte) error {
	if err := s.dir.RemoveAll(tmp); err != nil {
		return err
	}
	f, err := s.dir.OpenFile(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = cmp.Or(err, f.Close()); err != nil {
		s.dir.Unlink(tmp)
	}
	return err
}

// remove deletes the entry called name itself, whatever it is but a directory (never
// what a link points to), and what a killed writer left under its temporary name: a
// directory planted under the name is no state of ours and stays. An entry that is
// already gone is fine.
func (s *store) remove(name string) error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, n := range []string{name, tempName(name)} {
		if err := s.dir.Unlink(n); err != nil && !errors.Is(err, unix.EISDIR) {
			errs = append(errs, fmt.Errorf("host-device state: %w", err))
		}
	}
	return errors.Join(errs...)
}

// list returns every readable state of the network, by file name.
func (s *store) list(network string) (map[string]*saved, error) {
	if s == nil {
		return nil, nil
	}
	entries, err := s.dir.Entries()
	if err != nil {
		return nil, fmt.Errorf("host-device state: %w", err)
	}
	out := map[string]*saved{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		st, err := s.read(e.Name())
		if err != nil || st == nil || st.Network != network {
			continue
		}
		out[e.Name()] = st
	}
	return out, nil
}
