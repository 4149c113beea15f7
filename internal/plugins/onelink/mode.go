package onelink

import (
	"slices"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// A member whose link has modes (macvlan, ipvlan) keeps their config names in an array
// indexed by the kernel's mode, not in a map: a package-level map is built at every exec.

// ParseMode returns the mode called name in names; "" is def, the member's default. An
// unknown name is the config's error, naming the member's kind and listing its choices.
func ParseMode[M ~uint16](names []string, name string, def M, kind, choices string) (M, error) {
	if name == "" {
		return def, nil
	}
	if m := slices.Index(names, name); m >= 0 {
		return M(m), nil
	}
	return 0, cnierror.Invalid("mode: unknown %s mode %q (%s)", kind, name, choices)
}

// ModeName is m's name in names, "unknown" for a mode without one.
func ModeName[M ~uint16](names []string, m M) string {
	if int(m) < len(names) && names[m] != "" {
		return names[m]
	}
	return "unknown"
}
