package onelink

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
)

func TestModeNamesAreTheArrayIndexedByMode(t *testing.T) {
	names := []string{1: "one", 2: "two"} // mode 0 has no name of its own
	for _, tc := range []struct {
		name string
		mode uint16
		ok   bool
	}{{"", 2, true}, {"one", 1, true}, {"two", 2, true}, {"three", 0, false}, {"One", 0, false}} {
		m, err := ParseMode(names, tc.name, uint16(2), "test", "one or two")
		assert.Equal(t, tc.ok, err == nil, tc.name)
		assert.Equal(t, tc.mode, m, tc.name)
		if !tc.ok {
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.From(err).Code)
			assert.EqualError(t, err, `mode: unknown test mode "`+tc.name+`" (one or two)`)
		}
	}
	assert.Equal(t, "two", ModeName(names, uint16(2)))
	assert.Equal(t, "unknown", ModeName(names, uint16(0)), "a mode without a name")
	assert.Equal(t, "unknown", ModeName(names, uint16(3)), "a mode beyond the array")
}

func TestValidateMasterChecksTheMasterNameAndTheMTU(t *testing.T) {
	assert.NoError(t, ValidateMaster("", 0), "no master and the master's MTU")
	assert.NoError(t, ValidateMaster("eth1", 1400))
	for _, tc := range []struct {
		master, field string
		mtu           int
	}{{"a/b", "master", 0}, {"eth1", "mtu", 60}, {"eth1", "mtu", -1}, {"a/b", "master", 60}} {
		err := ValidateMaster(tc.master, tc.mtu)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.From(err).Code, "%q %d", tc.master, tc.mtu)
		assert.ErrorContains(t, err, tc.field+":", "%q %d: the error names the key", tc.master, tc.mtu)
	}
}
