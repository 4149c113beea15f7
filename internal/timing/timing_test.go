package timing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestQuantilesOfMeasurements(t *testing.T) {
	d := []time.Duration{5 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}
	assert.Equal(t, 3*time.Millisecond, Median(d))
	assert.Equal(t, 4*time.Millisecond, Quantile(d, 0.9))
	assert.Equal(t, 5*time.Millisecond, d[0], "the input keeps its order")
	assert.Equal(t, 3.0, MedianMs(d))
	assert.Zero(t, Median(nil))
}
