package hostdevice

import (
	"errors"
	"net"
	"path/filepath"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the host-device plugin's configuration (the keys beyond the spec's common
// ones). Exactly one selector names the device: device, hwaddr, kernelpath, pciBusID or
// the deviceID capability.
type Config struct {
	Device     string `json:"device"`
	HWAddr     string `json:"hwaddr"`
	KernelPath string `json:"kernelpath"`
	PCIBusID   string `json:"pciBusID"`
	// DataDir holds what the device looked like before ADD moved it (name, MTU, up
	// state), for DEL to put back. Not a reference key: the reference keeps the name
	// only, in the alias, and restores nothing else.
	DataDir string `json:"dataDir"`

	RuntimeConfig struct {
		DeviceID string `json:"deviceID"`
	} `json:"runtimeConfig"`
}

// DefaultDataDir is where the devices' original state is kept between ADD and DEL.
const DefaultDataDir = "/run/cni/host-device"

// selectorKind says how a selector finds the device.
type selectorKind int

const (
	byName selectorKind = iota
	byMAC
	byKernelPath
	byPCI
	byAux
)

// selector is the one way the config names the device.
type selector struct {
	kind selectorKind
	// field is the config key it came from, for error messages.
	field string
	value string
	mac   net.HardwareAddr
}

// conf is a validated config.
type conf struct {
	sel     selector
	dataDir string
	// dpdk: the PCI function is bound to a userspace I/O driver; nothing is moved.
	dpdk bool
}

// load parses and validates the config for ADD and CHECK: one selector, well formed,
// and for a PCI function whether it is in DPDK mode.
func load(req *skel.Request, sys sysfs) (*conf, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	dataDir, err := c.dataDir()
	if err != nil {
		return nil, err
	}
	sel, err := c.selector(sys)
	if err != nil {
		return nil, err
	}
	out := &conf{sel: sel, dataDir: dataDir}
	if sel.kind == byPCI {
		drv, err := sys.pciDriver(sel.value)
		out.dpdk = isDPDKDriver(drv)
		if errors.Is(err, errNoDevice) {
			return nil, cnierror.Invalid("%s: no PCI device %s", sel.field, sel.value)
		}
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeIO, "%s: read driver of %s: %v", sel.field, sel.value, err)
		}
	}
	return out, nil
}

// loadDataDir reads the data dir alone, as ADD would accept it.
func loadDataDir(req *skel.Request) (string, error) {
	c, err := skel.LoadConfig[struct {
		DataDir string `json:"dataDir"`
	}](req)
	if err != nil {
		return "", err
	}
	return (&Config{DataDir: c.DataDir}).dataDir()
}

// loadForDel reads only what DEL and GC need to find their state, the data dir: they
// must work with a config whose device has since vanished or changed drivers. A data dir
// that ADD would refuse can hold no state of ours: "" (none), said on stderr.
func loadForDel(req *skel.Request) string {
	dataDir, err := loadDataDir(req)
	if err != nil {
		note(req, "no state to look for: %v", err)
		return ""
	}
	return dataDir
}

func (c *Config) dataDir() (string, error) {
	if c.DataDir == "" {
		return DefaultDataDir, nil
	}
	if !filepath.IsAbs(c.DataDir) {
		return "", cnierror.Invalid("dataDir: must be an absolute path, got %q", c.DataDir)
	}
	return filepath.Clean(c.DataDir), nil
}

// selector checks that exactly one selector is set and that it is well formed.
func (c *Config) selector(sys sysfs) (selector, error) {
	var set []selector
	for _, s := range [...]selector{
		{kind: byName, field: "device", value: c.Device},
		{kind: byMAC, field: "hwaddr", value: c.HWAddr},
		{kind: byKernelPath, field: "kernelpath", value: c.KernelPath},
		{kind: byPCI, field: "pciBusID", value: c.PCIBusID},
		{kind: byPCI, field: "runtimeConfig.deviceID", value: c.RuntimeConfig.DeviceID},
	} {
		if s.value != "" {
			set = append(set, s)
		}
	}
	switch len(set) {
	case 0:
		return selector{}, cnierror.Invalid(`device, hwaddr, kernelpath, pciBusID, runtimeConfig.deviceID: specify exactly one`)
	case 1:
	default:
		fields := make([]string, len(set))
		for i, s := range set {
			fields[i] = s.field
		}
		return selector{}, cnierror.Invalid("%s: specify exactly one device selector, got %d", strings.Join(fields, ", "), len(set))
	}
	s := set[0]
	return s, s.validate(sys)
}

// validate checks the selector's value; a deviceID becomes a PCI or auxiliary selector.
func (s *selector) validate(sys sysfs) error {
	switch s.kind {
	case byName:
		if err := skel.ValidateIfNameField(s.field, s.value); err != nil {
			return err
		}
	case byMAC:
		mac, err := net.ParseMAC(s.value)
		if err != nil {
			return cnierror.Invalid("%s: invalid MAC address %q", s.field, s.value)
		}
		s.mac = mac
	case byKernelPath:
		p := filepath.Clean(s.value)
		if !filepath.IsAbs(s.value) || !strings.HasPrefix(p, "/sys/devices/") {
			return cnierror.Invalid("%s: %q must be an absolute path below /sys/devices/", s.field, s.value)
		}
		s.value = p
	case byPCI:
		if isPCIAddress(s.value) {
			return nil
		}
		if s.field == "runtimeConfig.deviceID" && isAuxName(s.value) && sys.auxExists(s.value) {
			s.kind = byAux
			return nil
		}
		if s.field == "runtimeConfig.deviceID" {
			return cnierror.Invalid("%s: %q is neither a PCI address (0000:3b:00.1) nor an auxiliary device", s.field, s.value)
		}
		return cnierror.Invalid("%s: %q is not a PCI address (0000:3b:00.1)", s.field, s.value)
	}
	return nil
}
