package onelink

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestModeNamesAreTheArrayIndexedByMode(t *testing.T) {
	names := []string{1: "one", 2: "two"} // mode 0 has no name of its own
	for _, tc := range []struct {
		name string
		mode uint16
		ok   bool
	}{{"", 2, true}, {"one", 1, true}, {"two", 2, true}, {"three", 0, false}, {"One", 0, false}} {
		m, ok := ParseMode(names, tc.name, uint16(2))
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.mode, m, tc.name)
	}
	assert.Equal(t, "two", ModeName(names, uint16(2)))
	assert.Equal(t, "unknown", ModeName(names, uint16(0)), "a mode without a name")
	assert.Equal(t, "unknown", ModeName(names, uint16(3)), "a mode beyond the array")
}
