// Command crio-load writes an image from a docker save archive into a containers/storage
// root, the one a CRI-O of make test-crio runs on, so that the node's sandbox image is
// there before CRI-O starts and nothing is ever pulled. It does what `podman load` does
// with the same root, runroot and driver, without podman (Debian's CI machines lack
// it), with the image and storage libraries CRI-O itself links.
//
//	crio-load -root DIR -runroot DIR -driver vfs -archive pause.tar -name localhost/x:1 -tmp DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/containers/image/v5/copy"
	"github.com/containers/image/v5/docker/archive"
	"github.com/containers/image/v5/signature"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/containers/storage/pkg/reexec"
)

func main() {
	// containers/storage re-executes its own binary for some driver operations.
	if reexec.Init() {
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "crio-load:", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", "", "containers/storage graph root (CRI-O's root)")
	runroot := flag.String("runroot", "", "containers/storage run root (CRI-O's runroot)")
	driver := flag.String("driver", "vfs", "storage driver (CRI-O's storage_driver)")
	path := flag.String("archive", "", "docker save archive holding the image")
	name := flag.String("name", "", "the image's name in the store")
	tmp := flag.String("tmp", "", "a directory for the blob-info cache and temporary files (never the machine's /var/lib/containers)")
	flag.Parse()
	if *root == "" || *runroot == "" || *path == "" || *name == "" || *tmp == "" {
		return errors.New("-root, -runroot, -archive, -name and -tmp are required")
	}
	store, err := storage.GetStore(storage.StoreOptions{GraphRoot: *root, RunRoot: *runroot, GraphDriverName: *driver})
	if err != nil {
		return fmt.Errorf("open the store at %s: %w", *root, err)
	}
	defer store.Shutdown(false)
	dst, err := istorage.Transport.ParseStoreReference(store, *name)
	if err != nil {
		return fmt.Errorf("-name %q: %w", *name, err)
	}
	src, err := archive.ParseReference(*path)
	if err != nil {
		return fmt.Errorf("-archive %q: %w", *path, err)
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: []signature.PolicyRequirement{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		return err
	}
	defer policy.Destroy()
	sys := &types.SystemContext{BlobInfoCacheDir: *tmp, BigFilesTemporaryDir: *tmp}
	if _, err := copy.Image(context.Background(), policy, dst, src, &copy.Options{SourceCtx: sys, DestinationCtx: sys}); err != nil {
		return fmt.Errorf("copy %s into %s: %w", *path, *root, err)
	}
	return nil
}
