// Command cni-image writes the multi-architecture cni node image as one OCI archive
// (make image), without a container daemon. See package image.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cnikit/cni/tools/image"
	"github.com/cnikit/cni/tools/internal/buildflags"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cni-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("cni-image", flag.ContinueOnError)
	var o image.Options
	bins := fs.String("bin", "", buildflags.BinaryUsage)
	gcBins := fs.String("gc-bin", "", "the GC caller cni-gc-cri per architecture, as -bin names cni's")
	fs.StringVar(&o.Version, "version", "dev", "image version (label, and the tag unless -tag is set)")
	fs.StringVar(&o.Tag, "tag", "", "the tag the archive names the image by (default: -version)")
	fs.StringVar(&o.Revision, "revision", "unknown", "source commit")
	fs.StringVar(&o.Source, "source", "", "source repository URL")
	fs.StringVar(&o.Name, "name", "docker.io/cnikit/cni", "repository the archive names the image after")
	epoch := fs.String("epoch", buildflags.EpochDefault(), buildflags.EpochUsage)
	out := fs.String("o", "bin/cni-image.tar", "output archive")
	if err := fs.Parse(args); err != nil {
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
	o.Binaries, o.GCCallers = map[string]string{}, map[string]string{}
	for _, b := range binaries {
		o.Binaries[b.Arch] = b.Path
	}
	for _, b := range gcCallers {
		o.GCCallers[b.Arch] = b.Path
	}
	if o.Created, err = buildflags.Epoch(*epoch); err != nil {
		return err
	}
	idx, err := image.Index(o)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := image.WriteArchive(&b, idx, o); err != nil {
		return err
	}
	// Written beside the target and renamed: a failed build leaves no half archive.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".cni-image-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s:%s (version %s), index %s\n", *out, o.Name, o.ImageTag(), o.Version, d)
	return nil
}
