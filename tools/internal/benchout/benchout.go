// Package benchout is what the tools module's benchmarks (cri-bench, cluster-bench)
// share: the figures they print as JSON for make bench's cnibench, which records them
// in its table, and the median they take of their timings.
package benchout

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"
)

// Figure is one row of cnibench's table.
type Figure struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Note   string  `json:"note,omitempty"`
	Target string  `json:"target,omitempty"`
}

// Main runs a benchmark and prints its figures on stdout; an error goes to stderr,
// named after the command, with exit status 1.
func Main(name string, run func() ([]Figure, error)) {
	figs, err := run()
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(figs)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Median is the median of ds (the mean of the two middle ones when their number is
// even), 0 when there are none.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 0:
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
