// Package build holds what the linker stamps into the binary (the Makefile's -ldflags
// -X): its version and commit, for `cni version` and the invocation log. They are
// never written at run time.
package build

// Version is the release (git describe) the binary was built from; Commit its commit.
var (
	Version = "dev"
	Commit  = "unknown"
)
