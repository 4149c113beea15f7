package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/cnikit/cni/internal/chain"
)

// runList prints one line per configuration file: network, version, plugin types, file.
// An unusable file is listed with its error and makes the exit status 1.
// A chain plugin is listed with its children: chain(loopback,bridge,portmap).
func runList(p Process, args []string) int {
	fs := newFlagSet(p, "ls", "[flags]")
	confDir := fs.String("conf-dir", p.envOr("NETCONFPATH", chain.DefaultConfDir), "network config dir (env NETCONFPATH)")
	if _, code, ok := parseArgs(p, fs, args, "", 0, 0); !ok {
		return code
	}
	entries, err := chain.List(*confDir)
	if err != nil {
		return p.fail("ls", err)
	}
	if len(entries) == 0 {
		fmt.Fprintf(p.Stderr, "cni ls: no network configurations in %s\n", *confDir)
		return ExitOK
	}
	status := ExitOK
	tw := tabwriter.NewWriter(p.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NETWORK\tVERSION\tPLUGINS\tFILE")
	for _, e := range entries {
		var plugins string
		if e.Err == nil {
			plugins, e.Err = pluginTypes(e.Network)
		}
		if e.Err != nil {
			fmt.Fprintf(tw, "-\t-\tinvalid: %v\t%s\n", e.Err, e.File)
			status = ExitFailure
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Network.Name, e.Network.CNIVersion, plugins, e.File)
	}
	if err := tw.Flush(); err != nil {
		return p.fail("ls", err)
	}
	return status
}

// pluginTypes lists the network's plugin types, comma-separated, with the children of
// a chain plugin in parentheses after it; a chain whose list is unusable is an error.
func pluginTypes(n *chain.Network) (string, error) {
	types := n.Types()
	for i, pc := range n.Plugins {
		if pc.Type != chain.PluginName {
			continue
		}
		children, err := chain.Children(pc)
		if err != nil {
			return "", fmt.Errorf("plugins[%d]: %w", i, err)
		}
		types[i] += "(" + strings.Join((&chain.Network{Plugins: children}).Types(), ",") + ")"
	}
	return strings.Join(types, ","), nil
}
