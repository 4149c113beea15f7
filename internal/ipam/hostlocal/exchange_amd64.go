package hostlocal

// sysRenameat2 is missing from the syscall package's amd64 table.
const sysRenameat2 = 316
