// Command cni-packages writes the .deb and .rpm of cni for each architecture
// (make packages). See package packages.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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
	bins := fs.String("bin", "", "ARCH=PATH[,ARCH=PATH]...: the static binary of each architecture")
	lister := fs.String("list", "bin/cni", "a cni binary that runs here: its --list names the plugins")
	version := fs.String("version", "dev", "build version (git describe)")
	homepage := fs.String("homepage", "", "source repository URL")
	units := fs.String("units", "deploy/systemd", "directory whose systemd units (*.service, *.socket) are shipped, when it exists")
	license := fs.String("license", "LICENSE", "license file")
	changelog := fs.String("changelog", "packaging/changelog.yml", "changelog (chglog YAML)")
	epoch := fs.String("epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
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
	secs := int64(0)
	if *epoch != "" {
		if secs, err = strconv.ParseInt(*epoch, 10, 64); err != nil {
			return fmt.Errorf("-epoch: %w", err)
		}
	}
	for _, kv := range strings.Split(*bins, ",") {
		arch, path, ok := strings.Cut(kv, "=")
		if !ok || arch == "" || path == "" {
			return fmt.Errorf("-bin: want ARCH=PATH, got %q", kv)
		}
		o := packages.Options{
			Binary: path, Names: names, Arch: arch, Version: *version, Homepage: *homepage,
			Units: unitFiles, License: *license, Changelog: *changelog, MTime: time.Unix(secs, 0).UTC(),
		}
		for _, format := range []string{"deb", "rpm"} {
			p, err := packages.Write(o, format, *out)
			if err != nil {
				return fmt.Errorf("%s %s: %w", arch, format, err)
			}
			fmt.Printf("%s: %d plugin links, %d systemd unit(s)\n", p, len(names), len(unitFiles))
		}
	}
	return nil
}
