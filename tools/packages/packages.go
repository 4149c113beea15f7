// Package packages builds the .deb and .rpm of cni with nfpm: /opt/cni/bin/cni, one
// relative symlink per plugin of the registry (the names come from the binary's
// --list), the GC caller of CRI nodes (cni-gc-cri, a program of the build tools'
// module), the systemd units found in deploy/systemd (with the .wants links of those
// that say X-StaticWantedBy=), the license and the changelog.
// The same inputs give the same bytes: every timestamp is the given epoch.
package packages

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// PluginDir is where the packages put the binary and its plugin names.
const PluginDir = "/opt/cni/bin"

// GCCallerPath is where the packages put cni-gc-cri, which cni-gc.service runs: not in
// PluginDir, where it would be taken for a plugin.
const GCCallerPath = "/usr/libexec/cni/cni-gc-cri"

// UnitDir is where systemd finds packaged units on Debian and on RPM distributions.
const UnitDir = "/usr/lib/systemd/system"

// Replaced is the Kubernetes project's package of the reference plugins, which puts them
// at the same paths and which kubelet's and kubeadm's packages depend on.
const Replaced = "kubernetes-cni"

// ReferenceVersion is the release of the reference plugins we are a drop-in for, and so
// the version of Replaced the packages provide: kubelet's "kubernetes-cni (>= 1.2.0)"
// then holds with ours in its place. It is internal/testbed/reftest's Version, the one
// the interop tests hold us to; this module cannot import the main module's internal
// packages, so TestReferenceVersionIsTheInteropTestsOne reads that file and fails when
// the two drift apart.
const ReferenceVersion = "1.9.1"

// Options are the inputs of one package.
type Options struct {
	Binary    string    // the static binary for Arch
	GCCaller  string    // the static cni-gc-cri for Arch; needed when Units hold cni-gc.service
	Names     []string  // plugin names, from the registry (cni --list)
	Arch      string    // GOARCH
	Version   string    // the build version (git describe)
	Homepage  string    // the source repository
	Units     []string  // systemd unit files to ship
	License   string    // the LICENSE file
	Changelog string    // the chglog YAML file
	MTime     time.Time // SOURCE_DATE_EPOCH
}

// Formats are the package formats built, by file extension.
var Formats = map[string]interface {
	Package(*nfpm.Info, io.Writer) error
	ConventionalFileName(*nfpm.Info) string
}{
	"deb": deb.Default,
	"rpm": rpm.DefaultRPM,
}

// PackageVersion turns a git describe version into one that dpkg and rpm order
// correctly: v1.2.3 → 1.2.3, v1.2.3-4-gabc → 1.2.3+4.gabc (after 1.2.3), and an
// untagged abc123-dirty → 0.0.0+abc123.dirty.
func PackageVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	base, rest := "0.0.0", v
	if regexp.MustCompile(`^[0-9]+\.[0-9]+`).MatchString(v) {
		base, rest, _ = strings.Cut(v, "-")
	}
	rest = regexp.MustCompile(`[^A-Za-z0-9.]+`).ReplaceAllString(rest, ".")
	rest = strings.Trim(rest, ".")
	if rest == "" {
		return base
	}
	return base + "+" + rest
}

// replacing returns the relations that make the package take Replaced's place in format's
// own idiom: dpkg and apt remove it in favour of ours, rpm -U and dnf erase it, and what
// depends on it is satisfied by what we provide, instead of being removed with it.
func replacing(format string) (nfpm.Overridables, error) {
	switch format {
	case "deb":
		// Debian policy's replacement (7.6.2): Conflicts with Replaces lets dpkg remove the
		// old package when ours is unpacked, and a versioned Provides satisfies versioned
		// dependencies. dpkg ignores a package's conflict with what it provides itself.
		return nfpm.Overridables{
			Conflicts: []string{Replaced},
			Replaces:  []string{Replaced},
			Provides:  []string{Replaced + " (= " + ReferenceVersion + ")"},
		}, nil
	case "rpm":
		// The usual rpm replacement: Obsoletes (what nfpm writes Replaces as) makes rpm -U
		// and dnf erase kubernetes-cni in the same transaction, and Provides satisfies
		// kubelet's "kubernetes-cni >= 1.2.0". Unversioned, as any release of it holds our
		// paths. No Conflicts: it would only repeat the Obsoletes, which already refuses
		// kubernetes-cni beside ours ("obsoleted by (installed) cni").
		return nfpm.Overridables{
			Replaces: []string{Replaced},
			Provides: []string{Replaced + " = " + ReferenceVersion},
		}, nil
	}
	return nfpm.Overridables{}, fmt.Errorf("unknown package format %q", format)
}

// Info is the nfpm description of the package of format ("deb" or "rpm") for one
// architecture.
func Info(o Options, format string) (*nfpm.Info, error) {
	if o.Binary == "" || len(o.Names) == 0 {
		return nil, fmt.Errorf("a binary and its plugin names are needed")
	}
	relations, err := replacing(format)
	if err != nil {
		return nil, err
	}
	contents := files.Contents{{
		Source:      o.Binary,
		Destination: filepath.Join(PluginDir, "cni"),
		FileInfo:    &files.ContentFileInfo{Mode: 0o755, MTime: o.MTime},
	}}
	names := slices.Sorted(slices.Values(o.Names))
	for _, n := range names {
		if n == "" || n == "cni" || strings.ContainsAny(n, "/ \t\n") || strings.HasPrefix(n, ".") {
			return nil, fmt.Errorf("invalid plugin name %q", n)
		}
		contents = append(contents, &files.Content{
			Type:        files.TypeSymlink,
			Source:      "cni",
			Destination: filepath.Join(PluginDir, n),
			FileInfo:    &files.ContentFileInfo{Mode: 0o777, MTime: o.MTime},
		})
	}
	if o.GCCaller != "" {
		contents = append(contents, &files.Content{
			Source:      o.GCCaller,
			Destination: GCCallerPath,
			FileInfo:    &files.ContentFileInfo{Mode: 0o755, MTime: o.MTime},
		})
	}
	for _, u := range slices.Sorted(slices.Values(o.Units)) {
		if filepath.Base(u) == "cni-gc.service" && o.GCCaller == "" {
			return nil, fmt.Errorf("%s runs %s: the GC caller binary is needed", u, GCCallerPath)
		}
		contents = append(contents, &files.Content{
			Source:      u,
			Destination: filepath.Join(UnitDir, filepath.Base(u)),
			FileInfo:    &files.ContentFileInfo{Mode: 0o644, MTime: o.MTime},
		})
		wanted, err := StaticWantedBy(u)
		if err != nil {
			return nil, err
		}
		for _, by := range wanted {
			contents = append(contents, &files.Content{
				Type:        files.TypeSymlink,
				Source:      "../" + filepath.Base(u),
				Destination: filepath.Join(UnitDir, by+".wants", filepath.Base(u)),
				FileInfo:    &files.ContentFileInfo{Mode: 0o777, MTime: o.MTime},
			})
		}
	}
	contents = append(contents,
		&files.Content{Source: o.License, Destination: "/usr/share/doc/cni/copyright", Packager: "deb",
			FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: o.MTime}},
		&files.Content{Source: o.License, Destination: "/usr/share/licenses/cni/LICENSE", Packager: "rpm",
			Type: files.TypeRPMLicense, FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: o.MTime}},
	)
	info := &nfpm.Info{
		Name:          "cni",
		Arch:          o.Arch,
		Platform:      "linux",
		Version:       PackageVersion(o.Version),
		VersionSchema: "none",
		Release:       "1",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "The cni authors <cni@cnikit.invalid>",
		Description: "CNI plugins in one static binary\n" +
			"One multi-call binary holding the Container Network Interface plugins (bridge,\n" +
			"host-local, portmap, bandwidth, ...) and a chain runner, linked into /opt/cni/bin\n" +
			"under every plugin name, where container runtimes look for plugins.",
		Vendor:    "cni",
		Homepage:  o.Homepage,
		License:   "Apache-2.0",
		Changelog: o.Changelog,
		MTime:     o.MTime,
	}
	info.Overridables = relations
	info.Contents = contents
	return nfpm.WithDefaults(info), nil
}

// Write builds the package of format ("deb" or "rpm") into dir and returns its path.
func Write(o Options, format, dir string) (string, error) {
	p, ok := Formats[format]
	if !ok {
		return "", fmt.Errorf("unknown package format %q", format)
	}
	info, err := Info(o, format)
	if err != nil {
		return "", err
	}
	info.Target = filepath.Join(dir, p.ConventionalFileName(info))
	f, err := os.CreateTemp(dir, ".cni-package-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := p.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("%s package: %w", format, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return "", err
	}
	return info.Target, os.Rename(f.Name(), info.Target)
}

// PluginNames asks a cni binary for the registry's names: the packages never carry a
// list of their own.
func PluginNames(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bin, err)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return nil, fmt.Errorf("%s --list printed no plugin names", bin)
	}
	return names, nil
}

// StaticWantedBy reads the units a unit file names in its X-StaticWantedBy= lines
// (systemd ignores X- keys): the package links the unit into each one's .wants
// directory under UnitDir, enabling it with no maintainer script, as `systemctl enable`
// would for WantedBy=. cni-repair.service is enabled so: a restart of nftables.service
// or firewalld.service must run it on every node that has the package, not on those
// whose operator thought of enabling it.
func StaticWantedBy(unit string) ([]string, error) {
	data, err := os.ReadFile(unit)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "X-StaticWantedBy=")
		if !ok {
			continue
		}
		for _, by := range strings.Fields(v) {
			if !regexp.MustCompile(`^[A-Za-z0-9@_.:-]+\.(service|target|socket|path)$`).MatchString(by) {
				return nil, fmt.Errorf("%s: X-StaticWantedBy: %q is no unit name", unit, by)
			}
			out = append(out, by)
		}
	}
	return out, nil
}

// Units returns the systemd units (*.service, *.socket, *.timer) of dir, none when dir
// does not exist: the packages pick up the dhcp daemon's units once they are there.
func Units(dir string) ([]string, error) {
	var out []string
	for _, pattern := range []string{"*.service", "*.socket", "*.timer"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		out = append(out, m...)
	}
	return out, nil
}
