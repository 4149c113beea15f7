// Package sysctl reads and writes the network sysctls under /proc/sys/net. Those files
// belong to the network namespace of the thread that opens them, so a caller that wants
// a container's value runs these functions inside that namespace (ns.Do).
package sysctl

import (
	"fmt"
	"os"
	"path"
	"strings"
)

// root is where the network sysctls live; every name is resolved under it.
const root = "/proc/sys/"

// Name validates a sysctl name in slash form relative to /proc/sys ("net/ipv4/ip_forward",
// "net/ipv6/conf/eth0/accept_dad") and returns its file path. Dotted names are not
// accepted: an interface name may itself contain dots ("cni0.100"), so the slash form
// is the only unambiguous one. A name that is absolute, holds "..", or leaves net/ is
// rejected, so that a name taken from a config can never reach other files.
func Name(name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("sysctl: empty name")
	case strings.HasPrefix(name, "/"):
		return "", fmt.Errorf("sysctl %q: must be relative to /proc/sys", name)
	case strings.Contains(name, "\x00"):
		return "", fmt.Errorf("sysctl %q: contains a NUL byte", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "." || part == "" {
			return "", fmt.Errorf("sysctl %q: invalid path element %q", name, part)
		}
	}
	if path.Clean(name) != name || !strings.HasPrefix(name, "net/") {
		return "", fmt.Errorf("sysctl %q: must name a file under net/", name)
	}
	return root + name, nil
}

// Get returns the value of a sysctl without its trailing newline.
func Get(name string) (string, error) {
	p, err := Name(name)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", name, err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// Set writes value to a sysctl.
func Set(name, value string) error {
	p, err := Name(name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("sysctl %s: %w", name, err)
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("sysctl %s=%s: %w", name, value, werr)
	}
	if cerr != nil {
		return fmt.Errorf("sysctl %s=%s: %w", name, value, cerr)
	}
	return nil
}

// Ensure writes value only when the sysctl holds something else. Writing some net
// sysctls has side effects even when the value is unchanged (forwarding resets per
// interface settings), and a read is cheaper than a write.
func Ensure(name, value string) error {
	cur, err := Get(name)
	if err == nil && cur == value {
		return nil
	}
	return Set(name, value)
}

// Iface returns the per-interface sysctl name "net/<family>/conf/<ifname>/<key>", where
// family is "ipv4" or "ipv6".
func Iface(family, ifname, key string) string {
	return "net/" + family + "/conf/" + ifname + "/" + key
}

// EnableForwarding turns on IP forwarding for the families asked for, in the calling
// thread's network namespace.
func EnableForwarding(ipv4, ipv6 bool) error {
	if ipv4 {
		if err := Ensure("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
	}
	if ipv6 {
		if err := Ensure("net/ipv6/conf/all/forwarding", "1"); err != nil {
			return err
		}
	}
	return nil
}
