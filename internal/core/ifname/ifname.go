// Package ifname holds the rules a Linux interface name must follow: the kernel's, ours
// (no control characters), and the two names no link may take. Both the spec layer
// (CNI_IFNAME, names in a config) and the host helpers (names read back from a
// prevResult or the kernel) apply them, so they sit below both.
package ifname

import (
	"fmt"
	"unicode"
)

// Check says why name is not a valid Linux interface name, or returns nil. The rule
// is the kernel's (dev_valid_name: 1-15 bytes, not "." or "..", no '/', ':' or
// whitespace), which the reference library applies too, plus no control characters: the
// kernel would take those, but they end lines of the iptables-restore scripts and logs
// that interface names are written into.
func Check(name string) error {
	return check(name, true)
}

// CheckKernel applies the kernel's rule alone, as libcni does: it takes the interface
// names with control characters that Check refuses, so a runtime built on libcni may
// have attached one.
func CheckKernel(name string) error {
	return check(name, false)
}

func check(name string, noControl bool) error {
	switch {
	case name == "":
		return fmt.Errorf("interface name is empty")
	case len(name) > 15:
		return fmt.Errorf("interface name %q is longer than 15 bytes", name)
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not allowed", name)
	}
	for _, r := range name {
		if r == '/' || r == ':' || unicode.IsSpace(r) || noControl && unicode.IsControl(r) {
			return fmt.Errorf("interface name %q contains an invalid character %q", name, r)
		}
	}
	return nil
}

// KernelReserved reports whether the kernel refuses name for any link although it
// passes the interface name rule: "all" and "default" are the per-family defaults under
// /proc/sys/net/ipv{4,6}/conf ("invalid argument" on create or rename).
func KernelReserved(name string) bool { return name == "all" || name == "default" }
