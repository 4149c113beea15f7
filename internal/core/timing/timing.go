// Package timing summarises repeated duration measurements, so that the plugins'
// benchmarks and `make bench` report medians the same way.
package timing

import (
	"math"
	"slices"
	"time"
)

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of d by the nearest-rank rule on the lower
// side, without reordering d; zero for no measurements.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// NearestRank returns the q-quantile (0 < q ≤ 1) of d by the nearest-rank rule: the
// smallest measurement with at least q of all at or below it, so that a p99 of few
// measurements is their largest, as operators read a tail. Zero for no measurements.
func NearestRank(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Median is Quantile(d, 0.5).
func Median(d []time.Duration) time.Duration { return Quantile(d, 0.5) }

// Ms is d in milliseconds, the unit every figure of ours is reported in.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MedianMs is the median of d in milliseconds, as benchmarks report it with
// b.ReportMetric.
func MedianMs(d []time.Duration) float64 { return Ms(Median(d)) }
