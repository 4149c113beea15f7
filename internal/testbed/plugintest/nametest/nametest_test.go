package nametest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The inputs are the ones the golden names were derived from.
func TestInputsAreThoseTheNamesWereDerivedFrom(t *testing.T) {
	assert.Len(t, ID64, 64)
	assert.Equal(t, strings.Repeat("0123456789abcdef", 15), ID240)
	assert.Equal(t, strings.Repeat("net-", 25), Net100)
}
