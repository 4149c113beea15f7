// Package netfilter chooses between the iptables and nftables rule backends, one
// decision shared by every plugin that installs packet-filter rules (bridge and ptp
// masquerade, portmap), so they never disagree on a node.
package netfilter

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/google/nftables"

	"github.com/cnikit/cni/internal/cnierror"
)

// Backend is a rule engine.
type Backend string

// The backends.
const (
	IPTables Backend = "iptables"
	NFTables Backend = "nftables"
)

// Choose resolves a config value ("", "auto", "iptables", "nftables"); field names the
// config key for the error message.
func Choose(field, setting string) (Backend, error) {
	switch setting {
	case "", "auto":
		return Detect(), nil
	case string(IPTables):
		return IPTables, nil
	case string(NFTables):
		return NFTables, nil
	}
	return "", cnierror.Newf(cnierror.CodeInvalidConfig,
		"%s: invalid value %q (want \"iptables\", \"nftables\" or \"auto\")", field, setting)
}

// Detect picks nftables when the kernel speaks nf_tables and the legacy iptables
// backend has no tables in use in this network namespace; iptables otherwise. It execs
// nothing: the legacy tables in use are listed in ip_tables_names (per netns),
// and nf_tables support is probed with one netlink request.
func Detect() Backend {
	// /proc/thread-self, not /proc/net (the main thread's namespace): the plugin may run
	// on a locked thread inside another namespace (in-process runner, tests).
	if legacyTablesInUse("/proc/thread-self/net/ip_tables_names") || legacyTablesInUse("/proc/thread-self/net/ip6_tables_names") {
		return IPTables
	}
	if !kernelHasNFTables() {
		return IPTables
	}
	return NFTables
}

func legacyTablesInUse(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) != ""
}

func kernelHasNFTables() bool {
	conn, err := nftables.New()
	if err != nil {
		return false
	}
	defer conn.CloseLasting()
	_, err = conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	return err == nil
}

// IsNotExist reports a "no such table, chain, set or element" answer of nf_tables.
// google/nftables does not always wrap the errno, so its text is matched too.
func IsNotExist(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), syscall.ENOENT.Error()))
}
