package tuning

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/statedir"
)

// maxAllowList bounds what is read of the allow-list: a FIFO or a device in its place
// must not hang or exhaust the plugin.
const maxAllowList = 1 << 20

// DefaultAllowList is the node's sysctl allow-list: one regular expression per line,
// matched against the sysctl key as configured. Without the file every key is allowed.
const DefaultAllowList = "/etc/cni/tuning/allowlist.conf"

// checkAllowList refuses any sysctl that no line of the allow-list at path matches. Empty
// lines and lines starting with "#" are skipped.
func checkAllowList(path string, want []Sysctl) error {
	if len(want) == 0 {
		return nil
	}
	data, err := statedir.ReadPath(path, maxAllowList)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sysctl allow-list: %w", err)
	}
	var allowed []*regexp.Regexp
	for n, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		re, err := regexp.Compile(line)
		if err != nil {
			return cnierror.Newf(cnierror.CodeInvalidConfig, "sysctl allow-list %s line %d: %v", path, n+1, err)
		}
		allowed = append(allowed, re)
	}
	for _, s := range want {
		if !slices.ContainsFunc(allowed, func(re *regexp.Regexp) bool { return re.MatchString(s.Key) }) {
			return cnierror.Newf(cnierror.CodeInvalidConfig,
				"sysctl: key %q is not in the node's allow-list %s", s.Key, path)
		}
	}
	return nil
}
