// Package buildflags parses the flags the release tools (cni-image, cni-packages)
// share, so that both read -bin and -epoch alike and say the same about bad values.
package buildflags

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// BinaryUsage is -bin's help text.
const BinaryUsage = "ARCH=PATH[,ARCH=PATH]...: the static binary of each architecture"

// EpochUsage is -epoch's help text.
const EpochUsage = "every timestamp, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)"

// EpochDefault is $SOURCE_DATE_EPOCH, the reproducible-builds convention.
func EpochDefault() string { return os.Getenv("SOURCE_DATE_EPOCH") }

// Binary is one architecture's binary named by -bin.
type Binary struct{ Arch, Path string }

// Binaries parses -bin's value, in the order given.
func Binaries(s string) ([]Binary, error) {
	var bins []Binary
	for _, kv := range strings.Split(s, ",") {
		arch, path, ok := strings.Cut(kv, "=")
		if !ok || arch == "" || path == "" {
			return nil, fmt.Errorf("-bin: want ARCH=PATH, got %q", kv)
		}
		bins = append(bins, Binary{arch, path})
	}
	return bins, nil
}

// Epoch parses -epoch's value: whole seconds since 1970, the empty string being 0.
func Epoch(s string) (time.Time, error) {
	secs := int64(0)
	if s != "" {
		var err error
		if secs, err = strconv.ParseInt(s, 10, 64); err != nil {
			return time.Time{}, fmt.Errorf("-epoch: %w", err)
		}
	}
	return time.Unix(secs, 0).UTC(), nil
}

// For is the path bins name for arch, "" when they name none.
func For(bins []Binary, arch string) string {
	for _, b := range bins {
		if b.Arch == arch {
			return b.Path
		}
	}
	return ""
}
