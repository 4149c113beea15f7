package hostdevice

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// sysfs reads the kernel's device tree below root: "/sys" on a host, a directory of
// the same shape in tests. Only the paths the reference reads are used.
type sysfs struct {
	root string
}

// isDPDKDriver reports whether a driver is a userspace I/O driver: a PCI function bound
// to one has no kernel network interface to move, and the container drives it directly.
func isDPDKDriver(name string) bool {
	return slices.Contains([]string{"vfio-pci", "uio_pci_generic", "igb_uio"}, name)
}

var (
	errNoDevice = errors.New("no such device")
	errNoNetdev = errors.New("no network interface")
)

func (s sysfs) pciDevice(addr string) string {
	return filepath.Join(s.root, "bus", "pci", "devices", addr)
}

func (s sysfs) auxDevice(name string) string {
	return filepath.Join(s.root, "bus", "auxiliary", "devices", name)
}

// kernelPath maps an absolute /sys/devices/... path into the tree.
func (s sysfs) kernelPath(p string) string {
	return filepath.Join(s.root, strings.TrimPrefix(p, "/sys"))
}

// auxExists reports whether an auxiliary-bus device of that name exists.
func (s sysfs) auxExists(name string) bool {
	_, err := os.Stat(s.auxDevice(name))
	return err == nil
}

// pciDriver returns the name of the driver the PCI function is bound to, "" when none.
func (s sysfs) pciDriver(addr string) (string, error) {
	dev := s.pciDevice(addr)
	if _, err := os.Stat(dev); err != nil {
		return "", errNoDevice
	}
	target, err := os.Readlink(filepath.Join(dev, "driver"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return filepath.Base(target), nil
}

// pciNetdevs lists the network interfaces of a PCI function. A virtio function has
// them one level down, under its virtioN child.
func (s sysfs) pciNetdevs(addr string) ([]string, error) {
	dev := s.pciDevice(addr)
	names, err := deviceNetdevs(dev)
	if len(names) > 0 || !errors.Is(err, errNoNetdev) {
		return names, err
	}
	virtio, _ := filepath.Glob(filepath.Join(dev, "virtio*"))
	for _, v := range virtio {
		if names, err := netdevs(v); err == nil {
			return names, nil
		}
	}
	return nil, errNoNetdev
}

// deviceNetdevs lists the network interfaces of the device at dev, a path in the tree:
// errNoDevice when there is no such device.
func deviceNetdevs(dev string) ([]string, error) {
	if _, err := os.Stat(dev); err != nil {
		return nil, errNoDevice
	}
	return netdevs(dev)
}

// netdevs reads the names in a device's net directory.
func netdevs(dev string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dev, "net"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errNoNetdev
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// isPCIAddress reports whether s is a full PCI address, domain:bus:device.function, as
// sysfs names them: "0000:3b:00.1".
func isPCIAddress(s string) bool {
	const hex = "0123456789abcdefABCDEF"
	return len(s) == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.' && s[11] >= '0' && s[11] <= '7' &&
		strings.Trim(s[:4], hex) == "" && strings.Trim(s[5:7], hex) == "" && strings.Trim(s[8:10], hex) == ""
}

// isAuxName reports whether s can name an auxiliary-bus device ("mlx5_core.sf.4"): a
// single path element.
func isAuxName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) <= 255 && !strings.ContainsAny(s, "/\x00")
}

// deviceOf returns the /sys/devices/ path of the bus device behind the host interface
// name, "" for a virtual interface (no device link) or when sysfs does not say.
func (s sysfs) deviceOf(name string) string {
	p, err := filepath.EvalSymlinks(filepath.Join(s.root, "class", "net", name, "device"))
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(s.root, p)
	if err != nil || !strings.HasPrefix(rel, "devices/") {
		return ""
	}
	return "/sys/" + rel
}

// present reports whether the bus device at a /sys/devices/ path is still there: a
// physical device that is neither in the host nor unplugged is in some netns still.
func (s sysfs) present(device string) bool {
	if device == "" {
		return false
	}
	_, err := os.Stat(s.kernelPath(device))
	return err == nil
}
