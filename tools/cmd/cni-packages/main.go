// Command cni-packages writes the .deb and .rpm of cni for each architecture
// (make packages). See package packages.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cnikit/cni/tools/internal/buildflags"
	"github.com/cnikit/cni/tools/packages"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cni-packages:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("cni-packages", flag.ContinueOnError)
	bins := fs.String("bin", "", buildflags.BinaryUsage)
	gcBins := fs.String("gc-bin", "", "the GC caller cni-gc-cri per architecture, as -bin names cni's")
	lister := fs.String("list", "bin/cni", "a cni binary that runs here: its --list names the plugins")
	version := fs.String("version", "dev", "build version (git describe)")
	homepage := fs.String("homepage", "", "source repository URL")
	units := fs.String("units", "deploy/systemd", "directory whose systemd units (*.service, *.socket) are shipped, when it exists")
	license := fs.String("license", "LICENSE", "license file")
	changelog := fs.String("changelog", "packaging/changelog.yml", "changelog (chglog YAML)")
	epoch := fs.String("epoch", buildflags.EpochDefault(), buildflags.EpochUsage)
	out := fs.String("o", "bin", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names, err := packages.PluginNames(*lister)
	if err != nil {
		return err
	}
	unitFiles, err := packages.Units(*units)
	if err != nil {
		return err
	}
	mtime, err := buildflags.Epoch(*epoch)
	if err != nil {
		return err
	}
	binaries, err := buildflags.Binaries(*bins)
	if err != nil {
		return err
	}
	gcCallers, err := buildflags.Binaries(*gcBins)
	if err != nil {
		return fmt.Errorf("-gc-bin: %w", err)
	}
	for _, b := range binaries {
		o := packages.Options{
			Binary: b.Path, GCCaller: buildflags.For(gcCallers, b.Arch), Names: names, Arch: b.Arch, Version: *version, Homepage: *homepage,
			Units: unitFiles, License: *license, Changelog: *changelog, MTime: mtime,
		}
		for _, format := range []string{"deb", "rpm"} {
			p, err := packages.Write(o, format, *out)
			if err != nil {
				return fmt.Errorf("%s %s: %w", b.Arch, format, err)
			}
			fmt.Printf("%s: %d plugin links, %d systemd unit(s)\n", p, len(names), len(unitFiles))
		}
	}
	return nil
}
