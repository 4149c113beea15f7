// Package version knows the CNI spec versions this toolkit speaks, how to compare them,
// and which commands each one allows.
package version

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Current is the newest spec version this toolkit implements; VERSION reports it.
const Current = "1.1.0"

// all lists every spec version, oldest first.
var all = [...]string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// Default is the version of a config or result that names none, as the spec says.
const Default = "0.1.0"

// OrDefault is v, or Default when v is empty: the one home of that rule.
func OrDefault(v string) string {
	if v == "" {
		return Default
	}
	return v
}

// All returns every spec version, oldest first.
func All() []string { return slices.Clone(all[:]) }

// From returns v and every later version, for plugins that need a minimum version.
func From(v string) []string {
	if i := slices.Index(all[:], v); i >= 0 {
		return slices.Clone(all[i:])
	}
	return nil
}

// Parse splits a version of up to three dot-separated integers; "" means 0.1.0, as in
// the reference library.
func Parse(v string) (major, minor, micro int, err error) {
	if v == "" {
		return 0, 1, 0, nil
	}
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return 0, 0, 0, fmt.Errorf("invalid version %q: too many parts", v)
	}
	nums := [3]int{}
	for i, p := range parts {
		n, perr := strconv.Atoi(p)
		if perr != nil || n < 0 {
			return 0, 0, 0, fmt.Errorf("invalid version %q: %q is not a number", v, p)
		}
		nums[i] = n
	}
	return nums[0], nums[1], nums[2], nil
}

// Compare returns -1, 0 or 1 as a is older, equal or newer than b. Unparseable versions
// sort before every valid one.
func Compare(a, b string) int {
	a1, a2, a3, aerr := Parse(a)
	b1, b2, b3, berr := Parse(b)
	switch {
	case aerr != nil && berr != nil:
		return 0
	case aerr != nil:
		return -1
	case berr != nil:
		return 1
	}
	return cmp.Or(cmp.Compare(a1, b1), cmp.Compare(a2, b2), cmp.Compare(a3, b3))
}

// AtLeast reports whether v is min or newer.
func AtLeast(v, min string) bool { return Compare(v, min) >= 0 }
