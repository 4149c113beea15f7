package hostlocal

import (
	"os"
	"syscall"
	"unsafe"
)

// renameExchange is the RENAME_EXCHANGE flag of renameat2(2).
const renameExchange = 0x2

// replaceFile moves tmp over target atomically. When target exists the two are
// swapped with renameat2(RENAME_EXCHANGE) and the old content (now at tmp) removed:
// a plain rename over an existing file makes ext4 flush the new file's data first
// (auto_da_alloc), which costs several times the rest of an ADD, while the swap is as
// atomic (target always exists, with the old or the new content) and skips that flush.
// Without target, or without the syscall, it is a plain rename.
func replaceFile(tmp, target string) error {
	if err := exchange(tmp, target); err == nil {
		return os.Remove(tmp)
	}
	return os.Rename(tmp, target)
}

func exchange(a, b string) error {
	if sysRenameat2 == 0 {
		return syscall.ENOSYS
	}
	pa, err := syscall.BytePtrFromString(a)
	if err != nil {
		return err
	}
	pb, err := syscall.BytePtrFromString(b)
	if err != nil {
		return err
	}
	cwd := -100 // AT_FDCWD
	_, _, errno := syscall.Syscall6(sysRenameat2, uintptr(cwd), uintptr(unsafe.Pointer(pa)),
		uintptr(cwd), uintptr(unsafe.Pointer(pb)), renameExchange, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
