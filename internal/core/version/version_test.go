package version

import (
	"testing"

	cniversion "github.com/containernetworking/cni/pkg/version"
	"github.com/stretchr/testify/assert"
)

// Parse accepts and refuses what libcni's ParseVersion does since it dropped semver
// (upstream row C6): one to three numbers, "" meaning 0.1.0; no "v" prefix, no
// prerelease, no fourth part.
func TestParseAgreesWithLibcni(t *testing.T) {
	for _, v := range []string{"", "1", "1.1", "1.1.0", "0.4.0", "10.20.30",
		"v1.0.0", "1.0.0-rc1", "1.x", "1.2.3.4", "1..0", " 1.0.0"} {
		t.Run(v, func(t *testing.T) {
			major, minor, micro, err := Parse(v)
			rmajor, rminor, rmicro, rerr := cniversion.ParseVersion(v)
			if rerr != nil {
				assert.Error(t, err, "libcni refuses %q: %v", v, rerr)
				return
			}
			if assert.NoError(t, err) {
				assert.Equal(t, [3]int{rmajor, rminor, rmicro}, [3]int{major, minor, micro})
			}
		})
	}
}

// A negative number is the one thing libcni's ParseVersion takes and ours refuses: no
// spec version is negative, and Compare would order it before 0.1.0.
func TestParseRefusesNegativeNumbersThatLibcniTakes(t *testing.T) {
	major, _, _, err := cniversion.ParseVersion("-1.0.0")
	assert.NoError(t, err)
	assert.Equal(t, -1, major)
	_, _, _, err = Parse("-1.0.0")
	assert.ErrorContains(t, err, `invalid version "-1.0.0": "-1" is not a number`)
}
