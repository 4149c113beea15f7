package main

import (
	"slices"
	"time"
)

// durations summarises repeated measurements.
type durations []time.Duration

func (d durations) quantile(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}

func (d durations) median() time.Duration { return d.quantile(0.5) }
func (d durations) p90() time.Duration    { return d.quantile(0.9) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
