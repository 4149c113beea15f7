package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// counters matches the packet counts of nft's and iptables-save's listings.
var counters = regexp.MustCompile(`counter packets \d+ bytes \d+|\[\d+:\d+\]`)

// hostState is what a scenario's host holds that pods add to: links, addresses,
// routes, qdiscs, rules of both backends, IPAM reservations and cache entries, each as
// sorted lines.
type hostState map[string][]string

// snapshot reads the scenario's host state.
func (s *scenario) snapshot() (hostState, error) {
	st := hostState{}
	err := s.host.Do(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			a := l.Attrs()
			st["links"] = append(st["links"], a.Name+" "+l.Type())
			addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
			if err != nil {
				return err
			}
			for _, ad := range addrs {
				if !ad.IP.IsLinkLocalUnicast() {
					st["addresses"] = append(st["addresses"], a.Name+" "+ad.IPNet.String())
				}
			}
			qdiscs, err := netlink.QdiscList(l)
			if err != nil {
				return err
			}
			for _, q := range qdiscs {
				st["qdiscs"] = append(st["qdiscs"], a.Name+" "+q.Type())
			}
		}
		routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() {
				continue
			}
			st["routes"] = append(st["routes"], r.String())
		}
		for _, cmd := range [][]string{{"nft", "list", "ruleset"}, {"iptables-save"}, {"ip6tables-save"}} {
			out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v: %s", cmd[0], err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				// Counters move with any packet (the kernel's own router solicitations).
				line = counters.ReplaceAllString(line, "")
				if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
					st[cmd[0]] = append(st[cmd[0]], line)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{"ipam", "cache"} {
		err := filepath.WalkDir(filepath.Join(s.tmp, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if !d.IsDir() {
				rel, _ := filepath.Rel(s.tmp, path)
				st["files"] = append(st["files"], rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for k := range st {
		slices.Sort(st[k])
	}
	return st, nil
}

// diff lists the lines after holds that before did not, and those gone; "" when equal.
// host-local's last-reserved record moves by design and is not compared.
func (before hostState) diff(after hostState) string {
	var out []string
	for _, k := range []string{"links", "addresses", "routes", "qdiscs", "nft", "iptables-save", "ip6tables-save", "files"} {
		b, a := before[k], after[k]
		for _, line := range a {
			if !slices.Contains(b, line) && !strings.Contains(line, "last_reserved_ip") {
				out = append(out, fmt.Sprintf("%s: + %s", k, line))
			}
		}
		for _, line := range b {
			if !slices.Contains(a, line) && !strings.Contains(line, "last_reserved_ip") {
				out = append(out, fmt.Sprintf("%s: - %s", k, line))
			}
		}
	}
	return strings.Join(out, "\n")
}
