package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// build is one implementation of the plugins that sections measure side by side: our
// binary, the -base build of it (before a change), or the reference plugins (-ref).
type build struct {
	label string // "ours", "base" or "reference"
	bin   string // the cni binary; "" for the reference
	ref   string // the reference plugins' directory
}

const (
	labelOurs = "ours"
	labelBase = "base"
	labelRef  = "reference"
)

func (bd build) isRef() bool { return bd.bin == "" }

// path is the executable a plugin name runs.
func (bd build) path(name string) string {
	if bd.isRef() {
		return filepath.Join(bd.ref, name)
	}
	return bd.bin
}

// has tells whether the build holds every plugin named (ours holds every plugin).
func (bd build) has(names ...string) bool {
	if !bd.isRef() {
		return true
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(bd.ref, n)); err != nil {
			return false
		}
	}
	return true
}

// pluginDir makes a fresh plugin directory holding the names as links into the build.
func (bd build) pluginDir(names ...string) (string, error) {
	return linkEach(bd.path, names...)
}

// ours is this build; base is -base, there when set.
func (b *bench) ours() build { return build{label: labelOurs, bin: b.bin} }

// ourBuilds are this build and, with -base, the base build: every section that measures
// our binary measures both, taking turns, so that a change shows as a ratio of moments
// a few milliseconds apart and a wave cannot move a figure unseen.
func (b *bench) ourBuilds() []build {
	out := []build{b.ours()}
	if b.base != "" {
		out = append(out, build{label: labelBase, bin: b.base})
	}
	return out
}

// allBuilds are ourBuilds and, with -ref, the reference when it holds every plugin
// named; a section that needs a plugin the reference directory lacks notes it.
func (b *bench) allBuilds(section string, names ...string) []build {
	out := b.ourBuilds()
	if b.ref == "" {
		return out
	}
	ref := build{label: labelRef, ref: b.ref}
	if !ref.has(names...) {
		b.record(section, "reference", 0, "", fmt.Sprintf("skipped: -ref lacks one of %v", names))
		return out
	}
	return append(out, ref)
}

// rotated returns xs turned by i places, so that who goes first changes from one round
// to the next: the second of two execs in a row may gain or lose from following the
// first.
func rotated[T any](xs []T, i int) []T {
	if len(xs) == 0 {
		return xs
	}
	k := i % len(xs)
	return append(append([]T(nil), xs[k:]...), xs[:k]...)
}

// stage copies every executable measured (-bin, -base, the files of -ref) into a fresh
// directory and points the bench at the copies, so that all of them have the same
// page-cache history: a binary just written by the linker, or read back from disk long
// ago, starts up to 15 % slower or faster than a fresh copy of the same bytes, which
// paired figures of two builds would otherwise take for a change of the code. The caller
// removes the directory.
func (b *bench) stage() (string, error) {
	dir, err := os.MkdirTemp("", "cnibench-builds-")
	if err != nil {
		return "", err
	}
	copyTo := func(src, dst string) (string, error) {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		return dst, copyExecutable(src, dst)
	}
	if b.bin, err = copyTo(b.bin, filepath.Join(dir, labelOurs, "cni")); err != nil {
		return dir, err
	}
	if b.base != "" {
		if b.base, err = copyTo(b.base, filepath.Join(dir, labelBase, "cni")); err != nil {
			return dir, err
		}
	}
	if b.ref != "" {
		entries, err := os.ReadDir(b.ref)
		if err != nil {
			return dir, err
		}
		for _, e := range entries {
			src := filepath.Join(b.ref, e.Name())
			if st, err := os.Stat(src); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
				continue
			}
			if _, err := copyTo(src, filepath.Join(dir, labelRef, e.Name())); err != nil {
				return dir, err
			}
		}
		b.ref = filepath.Join(dir, labelRef)
	}
	return dir, nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pluginHost is a host namespace and one container namespace with a plugin dir of one
// build, for sections that exec one plugin against attachments they make up.
type pluginHost struct {
	host, ctr *testns.NS
	dir       string
}

func newPluginHost(bd build, plugin string) (*pluginHost, error) {
	h := &pluginHost{}
	var err error
	if h.host, err = testns.Create(); err == nil {
		if h.ctr, err = testns.Create(); err == nil {
			h.dir, err = bd.pluginDir(plugin)
		}
	}
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *pluginHost) close() {
	for _, n := range []*testns.NS{h.host, h.ctr} {
		if n != nil {
			n.Close()
		}
	}
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
}
