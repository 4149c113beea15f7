package panics

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGoTurnsAPanicIntoAnErrorWithItsStack(t *testing.T) {
	err := <-Go(func() error { panic("boom") })
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "boom", pe.Value)
	assert.Contains(t, string(pe.Stack), "panics_test.go")
	assert.EqualError(t, err, "panic: boom")
}

func TestCallPassesErrorsAndNilThrough(t *testing.T) {
	want := errors.New("plain")
	assert.Same(t, want, Call(func() error { return want }))
	assert.NoError(t, Call(func() error { return nil }))
}

func TestAWrappedPanicIsStillFound(t *testing.T) {
	err := fmt.Errorf("bridge: %w", Call(func() error {
		var m map[string]int
		//lint:ignore SA5000 the panic of an assignment to a nil map is what this test catches
		m["x"] = 1
		return nil
	}))
	var pe *Error
	require.ErrorAs(t, err, &pe)
	assert.Contains(t, err.Error(), "assignment to entry in nil map")
}
