package cnierror

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromKeepsTheCodeOfAWrappedError(t *testing.T) {
	inner := New(CodeInvalidConfig, "mtu: too small")
	got := From(fmt.Errorf("bridge %q: %w", "cni0", inner))
	assert.Equal(t, CodeInvalidConfig, got.Code)
	assert.Equal(t, `bridge "cni0": mtu: too small`, got.Msg)
}

func TestFromDoesNotRepeatDetailsInTheMessage(t *testing.T) {
	inner := New(CodeIncompatibleVersion, "incompatible CNI versions").WithDetails("config is \"9\"")
	got := From(fmt.Errorf("plugin x: %w", inner))
	assert.Equal(t, "plugin x: incompatible CNI versions", got.Msg)
	assert.Equal(t, "config is \"9\"", got.Details)
}

func TestFromMakesUntypedErrorsInternal(t *testing.T) {
	got := From(errors.New("boom"))
	assert.Equal(t, CodeInternal, got.Code)
	assert.Equal(t, "boom", got.Msg)
	assert.Nil(t, From(nil))
}

// TestCannotRunKeepsTheCodeAndIsSeenThroughWrapping: the mark changes nothing on the
// wire (code, message, details) and is found through any wrapping, for DEL and GC only.
func TestCannotRunKeepsTheCodeAndIsSeenThroughWrapping(t *testing.T) {
	err := fmt.Errorf("plugin x: %w", CannotRun(New(CodeIncompatibleVersion, "incompatible CNI versions").WithDetails("config is \"9\"")))
	got := From(err)
	assert.Equal(t, CodeIncompatibleVersion, got.Code)
	assert.Equal(t, "plugin x: incompatible CNI versions", got.Msg)
	assert.Equal(t, "config is \"9\"", got.Details)
	assert.ErrorIs(t, err, ErrCannotRun)
	assert.True(t, CannotHaveMade("DEL", err))
	assert.True(t, CannotHaveMade("GC", err))
	assert.False(t, CannotHaveMade("ADD", err))
	assert.False(t, CannotHaveMade("CHECK", err))
	assert.False(t, CannotHaveMade("DEL", New(CodeIncompatibleVersion, "unmarked")), "only a marked error")
	assert.False(t, CannotHaveMade("DEL", nil))
}
