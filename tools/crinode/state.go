package crinode

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// State is what pods leave in a node: what the CNI plugins and the runtime create per
// pod, each listed so that two states compare equal when nothing is left over.
type State struct {
	// Links are the node's interfaces by name (veths, ifbs, bridges).
	Links []string
	// Qdiscs are the qdiscs that are not the kernel's defaults (tbf, ingress).
	Qdiscs []string
	// Rules are iptables-save's and nft's rulesets, counters dropped.
	Rules string
	// Reservations are host-local's reserved addresses, per network dir.
	Reservations []string
	// Cache are libcni's result cache entries.
	Cache []string
	// Netns are the network namespace files containerd pins (/var/run/netns, which is
	// /run/netns: Path resolves no absolute symlink into the node).
	Netns []string
}

var (
	counters    = regexp.MustCompile(`\[\d+:\d+\]|counter packets \d+ bytes \d+`)
	comment     = regexp.MustCompile(`(?m)^#.*\n`)
	defaultRoot = regexp.MustCompile(`qdisc (noqueue|noop|pfifo_fast|mq|fq_codel) `)
)

// State lists the node's current state.
func (n *Node) State() (State, error) {
	var s State
	links, err := n.Run("ip", "-o", "link", "show")
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(strings.TrimSpace(links), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			s.Links = append(s.Links, name)
		}
	}
	qd, err := n.Qdiscs()
	if err != nil {
		return s, err
	}
	for _, q := range strings.Split(strings.TrimSpace(qd), "\n") {
		if q != "" && !defaultRoot.MatchString(q) {
			s.Qdiscs = append(s.Qdiscs, q)
		}
	}
	var rules []string
	for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		out, err := n.Run(cmd[0], cmd[1:]...)
		if err != nil {
			return s, err
		}
		rules = append(rules, comment.ReplaceAllString(counters.ReplaceAllString(out, ""), ""))
	}
	s.Rules = strings.Join(rules, "")
	if s.Reservations, err = n.reservations(); err != nil {
		return s, err
	}
	if s.Cache, err = n.files("/var/lib/cni/results"); err != nil {
		return s, err
	}
	if s.Netns, err = n.files("/run/netns"); err != nil {
		return s, err
	}
	return s, nil
}

// reservations are the files of host-local's data dirs named after an address.
func (n *Node) reservations() ([]string, error) {
	root := n.Path("/var/lib/cni/networks")
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, perr := netip.ParseAddr(d.Name()); perr == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// files are the entries of the node's dir, none when it does not exist.
func (n *Node) files(dir string) ([]string, error) {
	entries, err := os.ReadDir(n.Path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out, err
}
