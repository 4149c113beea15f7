package install

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// isOurs tells whether the entry at p was installed by cni: a symlink to Dir/cni, a
// hardlink of Dir/cni or of Source, a file identical to one of them, or else any build
// of cni. Source counts so that a removed Dir/cni is still recognised; any build, so
// that the hardlinks and copies of an older cni that an interrupted upgrade or one run
// with --only leaves beside the new one are ours too, never a file to keep in KeptDir
// in place of the reference plugin there.
func (r *run) isOurs(p string) (bool, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	if isSymlink(fi) {
		return r.pointsAtBinary(p), nil
	}
	if !fi.Mode().IsRegular() {
		return false, nil
	}
	for _, ref := range []string{r.target(), r.Source} {
		if sameInode(fi, ref) {
			return true, nil
		}
		same, err := sameContent(p, ref)
		if err != nil || same {
			return same, err
		}
	}
	return isBuildOfCni(p)
}

// buildLine is the line of build information that Go writes into every binary built
// from cni's main package (`go version -m` prints it): no other project's plugin holds
// it.
const buildLine = "path\tgithub.com/cnikit/cni/cmd/cni\n"

// isBuildOfCni tells whether the regular file at p is a build of cni, of any version,
// by its buildLine. debug/buildinfo would find the line through the object file's
// sections, but it links five object-file readers (half a megabyte) into every plugin
// exec for a line that is found as it is.
func isBuildOfCni(p string) (bool, error) {
	f, _, err := openRegular(p)
	if f == nil {
		return false, err
	}
	defer f.Close()
	return holds(f, []byte(buildLine))
}

// holds tells whether r holds needle, reading it once, a chunk at a time.
func holds(r io.Reader, needle []byte) (bool, error) {
	buf := make([]byte, max(64<<10, 2*len(needle)))
	// carried is the tail of the last chunk that a needle may go on from.
	carried := 0
	for {
		n, err := r.Read(buf[carried:])
		data := buf[:carried+n]
		if bytes.Contains(data, needle) {
			return true, nil
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		carried = min(len(needle)-1, len(data))
		copy(buf, data[len(data)-carried:])
	}
}

// pointsAtBinary tells whether p is a symlink whose target is Dir/cni, relative or
// absolute, or FinalDir/cni.
func (r *run) pointsAtBinary(p string) bool {
	target, err := os.Readlink(p)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(r.Dir, target)
	}
	target = filepath.Clean(target)
	return target == filepath.Clean(r.target()) || r.FinalDir != "" && target == filepath.Join(r.FinalDir, Binary)
}

// sameInode tells whether fi and the file at ref are one inode.
func sameInode(fi fs.FileInfo, ref string) bool {
	rfi, err := os.Stat(ref)
	return err == nil && rfi.Mode().IsRegular() && os.SameFile(fi, rfi)
}

// sameContent tells whether two regular files hold the same bytes; a missing file or
// one that is not regular is never the same.
func sameContent(a, b string) (bool, error) {
	fa, sa, err := openRegular(a)
	if fa == nil {
		return false, err
	}
	defer fa.Close()
	fb, sb, err := openRegular(b)
	if fb == nil {
		return false, err
	}
	defer fb.Close()
	if sa.Size() != sb.Size() {
		return false, nil
	}
	return sameBytes(fa, fb)
}

// openRegular opens p, and gives its status, when it is a regular file; a nil file and
// no error when it is missing or is something else.
func openRegular(p string) (*os.File, fs.FileInfo, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func sameBytes(a, b io.Reader) (bool, error) {
	const chunk = 64 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, errA := io.ReadFull(a, ba)
		nb, errB := io.ReadFull(b, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		endA := errors.Is(errA, io.EOF) || errors.Is(errA, io.ErrUnexpectedEOF)
		endB := errors.Is(errB, io.EOF) || errors.Is(errB, io.ErrUnexpectedEOF)
		if errA != nil && !endA {
			return false, errA
		}
		if errB != nil && !endB {
			return false, errB
		}
		if endA || endB {
			return endA && endB, nil
		}
	}
}
