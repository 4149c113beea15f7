//go:build !amd64 && !(linux && (arm64 || loong64 || mips64 || mips64le || riscv64 || s390x))

package hostlocal

// sysRenameat2 is unknown here: replaceFile falls back to rename.
const sysRenameat2 = 0
