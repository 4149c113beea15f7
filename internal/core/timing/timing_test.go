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

func TestNearestRankReadsTheTail(t *testing.T) {
	d := []time.Duration{20 * time.Millisecond, 31 * time.Millisecond}
	assert.Equal(t, 31*time.Millisecond, NearestRank(d, 0.99), "the p99 of two is the larger")
	assert.Equal(t, 20*time.Millisecond, NearestRank(d, 0.5))
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i))
	}
	assert.Equal(t, time.Duration(50), NearestRank(hundred, 0.5))
	assert.Equal(t, time.Duration(90), NearestRank(hundred, 0.9))
	assert.Equal(t, time.Duration(99), NearestRank(hundred, 0.99))
	assert.Equal(t, time.Duration(1), NearestRank(hundred, 0))
	assert.Zero(t, NearestRank(nil, 0.5))
}
