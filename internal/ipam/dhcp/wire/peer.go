package wire

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// PeerUID is the effective uid of the process that connected conn (SO_PEERCRED: the
// kernel's record of the caller at connect time, which it cannot forge).
func PeerUID(conn net.Conn) (uint32, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return 0, errors.New("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return cred.Uid, nil
}

// OwnerOrRoot admits the callers whose uid is root's or uid (the daemon's own).
func OwnerOrRoot(uid uint32) func(net.Conn) error {
	return func(conn net.Conn) error {
		peer, err := PeerUID(conn)
		if err != nil {
			return err
		}
		if peer != 0 && peer != uid {
			return fmt.Errorf("uid %d may not use the dhcp daemon (only root and uid %d)", peer, uid)
		}
		return nil
	}
}
