package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Host is a network namespace held by a pause process: the underlay switch, etcd's
// host, the outside world. It goes when Close kills the process.
type Host struct {
	Name string
	// Addr is its underlay address (none for the switch).
	Addr netip.Addr
	cmd  *exec.Cmd
}

func newHost(name, pause string) (*Host, error) {
	h := &Host{Name: name, cmd: exec.Command("unshare", "--net", pause)}
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// unshare execs pause once the namespace is made.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", h.Pid())); exe == pause {
			break
		}
		if time.Now().After(deadline) {
			h.Close()
			return nil, fmt.Errorf("%s: its namespace did not come up", name)
		}
	}
	if _, err := h.Run("ip", "link", "set", "lo", "up"); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Pid is the holder's PID: ip link ... netns takes it.
func (h *Host) Pid() int { return h.cmd.Process.Pid }

// NetNS is the path of the host's network namespace.
func (h *Host) NetNS() string { return fmt.Sprintf("/proc/%d/ns/net", h.Pid()) }

// Run runs a command in the host's network namespace.
func (h *Host) Run(name string, args ...string) (string, error) {
	return nsenterNet(h.Pid(), name, args...)
}

func nsenterNet(pid int, name string, args ...string) (string, error) {
	argv := append([]string{"--target", strconv.Itoa(pid), "--net", "--", name}, args...)
	out, err := exec.Command("nsenter", argv...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Close kills the holder, and with it the namespace.
func (h *Host) Close() {
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// newSwitch is the underlay: a bridge, lab0, in a host of its own.
func newSwitch(pause string) (*Host, error) {
	sw, err := newHost("switch", pause)
	if err != nil {
		return nil, err
	}
	for _, s := range [][]string{{"link", "add", "lab0", "type", "bridge"}, {"link", "set", "lab0", "up"}} {
		if _, err := sw.Run("ip", s...); err != nil {
			sw.Close()
			return nil, err
		}
	}
	return sw, nil
}

// attach plugs the network namespace of pid into the switch: eth0 there with addr,
// up; its peer a port of lab0 named after the host.
func (sw *Host) attach(pid int, name string, addr netip.Addr) error {
	port := "p-" + name
	if len(port) > 15 {
		return errors.New("host name too long for a port name")
	}
	steps := [][]string{
		{"link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)},
		{"link", "set", port, "master", "lab0"},
		{"link", "set", port, "up"},
	}
	for _, s := range steps {
		if _, err := sw.Run("ip", s...); err != nil {
			return err
		}
	}
	prefix := netip.PrefixFrom(addr, Underlay.Bits()).String()
	for _, s := range [][]string{{"addr", "add", prefix, "dev", "eth0"}, {"link", "set", "eth0", "up"}} {
		if _, err := nsenterNet(pid, "ip", s...); err != nil {
			return err
		}
	}
	return nil
}
