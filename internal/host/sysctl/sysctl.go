// Package sysctl reads and writes the network sysctls under /proc/sys/net. Those files
// belong to the network namespace of the thread that opens them, so a caller that wants
// a container's value runs these functions inside that namespace (ns.Do).
package sysctl

import (
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
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
	b, err := readFile(p)
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
	if err := writeFile(p, value); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// readFile and writeFile use the file's descriptor directly: the os package would
// register each /proc/sys file with the runtime's poller (it supports poll), four more
// system calls per access for a read or a write that never blocks. Errors are the os
// package's (*os.PathError, matching os.ErrNotExist and the like).
func readFile(p string) ([]byte, error) {
	fd, err := openFile(p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 64)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := ignoringEINTR(func() (int, error) { return unix.Read(fd, buf[len(buf):cap(buf)]) })
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func writeFile(p, value string) error {
	fd, err := openFile(p, unix.O_WRONLY|unix.O_TRUNC)
	if err != nil {
		return err
	}
	n, err := ignoringEINTR(func() (int, error) { return unix.Write(fd, []byte(value)) })
	if err == nil && n < len(value) {
		err = io.ErrShortWrite
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: p, Err: err}
	}
	return nil
}

func openFile(p string, flags int) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(p, flags|unix.O_CLOEXEC, 0) })
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return fd, nil
}

func ignoringEINTR(fn func() (int, error)) (int, error) {
	for {
		n, err := fn()
		if err != unix.EINTR {
			return n, err
		}
	}
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
