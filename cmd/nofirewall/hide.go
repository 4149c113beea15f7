package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// firewallPatterns are the names of the firewall tools, as filepath.Match patterns: the
// iptables families (legacy and nft flavours, save/restore/translate, their multi-call
// binaries) and nft.
var firewallPatterns = []string{"iptables*", "ip6tables*", "ebtables*", "arptables*", "xtables-*", "nft"}

// isFirewallName reports whether a file name is one of the firewall tools.
func isFirewallName(name string) bool {
	return slices.ContainsFunc(firewallPatterns, func(p string) bool {
		ok, _ := filepath.Match(p, name)
		return ok
	})
}

// searchDirs are the directories whose firewall tools are hidden: PATH's and the usual
// bin directories, each once.
func searchDirs() []string {
	dirs := filepath.SplitList(os.Getenv("PATH"))
	dirs = append(dirs, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
	var out []string
	for _, d := range dirs {
		if d != "" && filepath.IsAbs(d) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// hideFirewallBinaries bind-mounts an empty file of mode 0644 over the file behind every
// firewall tool name in dirs (a name that is a link hides its target, so every other
// name of a multi-call binary goes too) and returns the files it hid. The empty file is
// unlinked at once: the mounts hold it.
func hideFirewallBinaries(dirs []string) ([]string, error) {
	standIn, err := os.CreateTemp("", "nofirewall-")
	if err != nil {
		return nil, err
	}
	standIn.Close()
	defer os.Remove(standIn.Name())
	if err := os.Chmod(standIn.Name(), 0o644); err != nil {
		return nil, err
	}
	var hidden []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // a PATH entry that does not exist
		}
		for _, e := range entries {
			if !isFirewallName(e.Name()) {
				continue
			}
			target, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
			if err != nil || slices.Contains(hidden, target) {
				continue // a dangling link runs nothing
			}
			if fi, err := os.Stat(target); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if err := syscall.Mount(standIn.Name(), target, "", syscall.MS_BIND, ""); err != nil {
				return nil, fmt.Errorf("hide %s: %w", target, err)
			}
			hidden = append(hidden, target)
		}
	}
	return hidden, nil
}

// firewallExecs are the traced execs of a firewall binary: by a firewall tool's name,
// or of a file that was hidden.
func firewallExecs(execs []execEvent, hidden []string) []execEvent {
	var out []execEvent
	for _, e := range execs {
		if isFirewallName(filepath.Base(e.path)) || slices.Contains(hidden, e.path) {
			out = append(out, e)
		}
	}
	return out
}
