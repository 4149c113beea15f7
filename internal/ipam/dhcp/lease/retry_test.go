package lease

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/ipam/dhcp/linkid"
)

func TestRetryLogsAFailedAttemptUnderItsLeaseAndStopsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lines []string
	logf := func(format string, a ...any) {
		lines = append(lines, fmt.Sprintf(format, a...))
		cancel() // during the pause before the next attempt
	}
	tries := 0
	_, err := Retry(ctx, time.Minute, logf, "c/n/eth0 (DHCPv6)", func() (int, error) {
		tries++
		return 0, errors.New("no answer")
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "(last attempt: no answer)")
	assert.Equal(t, 1, tries)
	require.Len(t, lines, 1)
	assert.Regexp(t, `^c/n/eth0 \(DHCPv6\): attempt failed: no answer; retrying in \d`, lines[0])
}

func TestRetryStopsAtOnceOnAFinalErrorAndLogsNothingWithoutLogf(t *testing.T) {
	tries := 0
	v, err := Retry(context.Background(), time.Minute, nil, "c/n/eth0", func() (string, error) {
		tries++
		return "", fmt.Errorf("netns: %w", linkid.ErrGone)
	})
	require.ErrorIs(t, err, linkid.ErrGone)
	assert.Empty(t, v)
	assert.Equal(t, 1, tries)

	v, err = Retry(context.Background(), time.Minute, nil, "c/n/eth0", func() (string, error) { return "bound", nil })
	require.NoError(t, err)
	assert.Equal(t, "bound", v)
}

func TestRetryWithoutLogfWaitsOutAFailedAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Retry(ctx, time.Minute, nil, "c/n/eth0", func() (int, error) { return 0, errors.New("no answer") })
	assert.ErrorContains(t, err, "no answer", "the attempt's error, or the deadline's naming it")
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "the pause ran to the deadline")
}
