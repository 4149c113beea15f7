package onelink

// A member whose link has modes (macvlan, ipvlan) keeps their config names in an array
// indexed by the kernel's mode, not in a map: a package-level map is built at every exec.

// ParseMode returns the mode called name in names; "" is def, the member's default.
func ParseMode[M ~uint16](names []string, name string, def M) (M, bool) {
	if name == "" {
		return def, true
	}
	for m, n := range names {
		if n == name {
			return M(m), true
		}
	}
	return 0, false
}

// ModeName is m's name in names, "unknown" for a mode without one.
func ModeName[M ~uint16](names []string, m M) string {
	if int(m) < len(names) && names[m] != "" {
		return names[m]
	}
	return "unknown"
}
