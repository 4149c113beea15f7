// Command tapattach is a test helper for the tap plugin: it opens /dev/net/tun (root
// only on some hosts), drops to the given uid and gid without capabilities, and tries
// to attach to an existing tap the way a VM process would. Exit status: 0 attached,
// 3 refused by the kernel (EPERM), 1 any other failure.
//
// Usage: tapattach NAME UID GID single|multi
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 5 {
		fail(errors.New("usage: tapattach NAME UID GID single|multi"))
	}
	uid, err := strconv.Atoi(os.Args[2])
	must(err)
	gid, err := strconv.Atoi(os.Args[3])
	must(err)
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(err)
	// Dropping from root to another uid also drops every capability.
	must(syscall.Setgroups(nil))
	must(syscall.Setresgid(gid, gid, gid))
	must(syscall.Setresuid(uid, uid, uid))
	ifr, err := unix.NewIfreq(os.Args[1])
	must(err)
	flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if os.Args[4] == "multi" {
		flags |= unix.IFF_MULTI_QUEUE
	}
	ifr.SetUint16(flags)
	err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	if errors.Is(err, unix.EPERM) {
		os.Exit(3)
	}
	must(err)
}

// must ends the helper with status 1 on any failure but the kernel's refusal.
func must(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tapattach:", err)
	os.Exit(1)
}
