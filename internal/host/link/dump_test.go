package link_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/host/link"
)

// interrupted is a dump that the kernel flags as interrupted (NLM_F_DUMP_INTR) the
// first times times, with a partial answer, and then answers in full.
func interrupted(times int, calls *int) func() ([]string, error) {
	return func() ([]string, error) {
		*calls++
		if *calls <= times {
			return []string{"partial"}, netlink.ErrDumpInterrupted
		}
		return []string{"full", "answer"}, nil
	}
}

func TestRetryDumpRetriesAnInterruptedDumpAndNeverFailsOnIt(t *testing.T) {
	calls := 0
	got, err := link.RetryDump(interrupted(2, &calls))
	assert.NoError(t, err)
	assert.Equal(t, []string{"full", "answer"}, got)
	assert.Equal(t, 3, calls)

	calls = 0
	got, err = link.RetryDump(interrupted(1000, &calls))
	assert.NoError(t, err, "an interruption is never an error: the last answer is used")
	assert.Equal(t, []string{"partial"}, got)
	assert.Equal(t, 5, calls, "bounded as the reference's netlinksafe")

	calls = 0
	boom := errors.New("boom")
	_, err = link.RetryDump(func() ([]string, error) { calls++; return nil, boom })
	assert.ErrorIs(t, err, boom, "other errors are returned at once")
	assert.Equal(t, 1, calls)
}
