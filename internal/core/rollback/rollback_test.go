package rollback

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUndoRunsNewestFirstAndKeepsGoing(t *testing.T) {
	var order []string
	var s Stack
	s.Push("a", func() error { order = append(order, "a"); return nil })
	s.Push("b", func() error { order = append(order, "b"); return errors.New("boom") })
	s.Push("c", func() error { order = append(order, "c"); return nil })
	err := s.Undo()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "undo b: boom")
	assert.Equal(t, []string{"c", "b", "a"}, order)
	assert.NoError(t, s.Undo(), "a second Undo does nothing")
	assert.Len(t, order, 3)
}

func TestOnErrorUndoesOnlyOnFailure(t *testing.T) {
	run := func(fail bool) (undone bool, err error) {
		var s Stack
		defer s.OnError(&err)
		s.Push("x", func() error { undone = true; return nil })
		if fail {
			return false, errors.New("failed")
		}
		return false, nil
	}
	undone, err := run(false)
	assert.NoError(t, err)
	assert.False(t, undone)

	var s Stack
	flag := false
	func() (err error) {
		defer s.OnError(&err)
		s.Push("x", func() error { flag = true; return errors.New("undo broke") })
		return errors.New("failed")
	}()
	assert.True(t, flag)
}

func TestOnErrorReportsUndoFailure(t *testing.T) {
	f := func() (err error) {
		var s Stack
		defer s.OnError(&err)
		s.Push("x", func() error { return errors.New("undo broke") })
		return errors.New("failed")
	}
	err := f()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed")
	assert.Contains(t, err.Error(), "undo broke")
}
