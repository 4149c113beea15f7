// Package logreport turns invocation log lines (internal/obs/invlog) into what operators
// read and what other tools ingest: counts, duration quantiles and errors per plugin
// and command, in a table or in the Prometheus text format for node-exporter's textfile
// collector, and OTLP/JSON spans for an OpenTelemetry collector.
package logreport

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/obs/invlog"
)

// Key groups invocations.
type Key struct {
	Plugin, Command string
}

// Row is what Stats reports for one plugin and command.
type Row struct {
	Key
	Count, Errors int
	// P50, P90 and P99 are quantiles of the duration.
	P50, P90, P99 time.Duration
	// Codes counts the failures by CNI error code.
	Codes map[uint]int
}

// Stats aggregates log entries by plugin and command.
type Stats struct {
	groups map[Key]*group
}

type group struct {
	durations []time.Duration
	errors    map[uint]int
}

// Add counts e.
func (s *Stats) Add(e *invlog.Entry) {
	if s.groups == nil {
		s.groups = map[Key]*group{}
	}
	k := Key{Plugin: e.Plugin, Command: e.Command}
	g := s.groups[k]
	if g == nil {
		g = &group{errors: map[uint]int{}}
		s.groups[k] = g
	}
	g.durations = append(g.durations, msDuration(e.DurationMs))
	if e.Error != nil {
		g.errors[e.Error.Code]++
	}
}

// Rows returns a row per plugin and command, sorted by plugin then command.
func (s *Stats) Rows() []Row {
	rows := make([]Row, 0, len(s.groups))
	for k, g := range s.groups {
		r := Row{Key: k, Count: len(g.durations), Codes: g.errors,
			P50: timing.NearestRank(g.durations, 0.5), P90: timing.NearestRank(g.durations, 0.9), P99: timing.NearestRank(g.durations, 0.99)}
		for _, n := range g.errors {
			r.Errors += n
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Plugin, b.Plugin), cmp.Compare(a.Command, b.Command))
	})
	return rows
}

// WriteTable prints the rows for a human: durations in milliseconds, then the errors by
// code.
func (s *Stats) WriteTable(w io.Writer) error {
	rows := s.Rows()
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-7s %7s %7s %9s %9s %9s\n", "PLUGIN", "COMMAND", "COUNT", "ERRORS", "P50 ms", "P90 ms", "P99 ms")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-12s %-7s %7d %7d %9.2f %9.2f %9.2f\n", r.Plugin, r.Command, r.Count, r.Errors,
			timing.Ms(r.P50), timing.Ms(r.P90), timing.Ms(r.P99))
	}
	head := "\nerrors by code:\n"
	for _, r := range rows {
		for _, c := range sortedCodes(r.Codes) {
			fmt.Fprintf(&b, "%s  %-12s %-7s code %-4d %d\n", head, r.Plugin, r.Command, c, r.Codes[c])
			head = ""
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WritePrometheus prints the rows in the Prometheus text exposition format. They are
// gauges: they describe the lines the log holds now, and rotation drops old ones, so
// they are not counters that only grow.
func (s *Stats) WritePrometheus(w io.Writer, unreadable int) error {
	rows := s.Rows()
	var b strings.Builder
	gauge := func(name, help string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name) }
	gauge("cni_invocations", "Plugin invocations in the invocation log, by plugin and command.")
	for _, r := range rows {
		fmt.Fprintf(&b, "cni_invocations{%s} %d\n", labels(r.Key), r.Count)
	}
	gauge("cni_invocation_errors", "Failed invocations in the invocation log, by plugin, command and CNI error code.")
	for _, r := range rows {
		for _, c := range sortedCodes(r.Codes) {
			fmt.Fprintf(&b, "cni_invocation_errors{%s,code=\"%d\"} %d\n", labels(r.Key), c, r.Codes[c])
		}
	}
	gauge("cni_invocation_duration_seconds", "Quantiles of the invocations' durations in the invocation log.")
	for _, r := range rows {
		for _, q := range []struct {
			name string
			d    time.Duration
		}{{"0.5", r.P50}, {"0.9", r.P90}, {"0.99", r.P99}} {
			fmt.Fprintf(&b, "cni_invocation_duration_seconds{%s,quantile=%q} %s\n", labels(r.Key), q.name, seconds(q.d))
		}
	}
	gauge("cni_log_unreadable_lines", "Lines of the invocation log that are no entry (torn or foreign).")
	fmt.Fprintf(&b, "cni_log_unreadable_lines %d\n", unreadable)
	_, err := io.WriteString(w, b.String())
	return err
}

func labels(k Key) string {
	return fmt.Sprintf("plugin=%s,command=%s", labelValue(k.Plugin), labelValue(k.Command))
}

// labelValue quotes a label value as the exposition format escapes it: backslash,
// double quote and newline.
func labelValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) }

func sortedCodes(m map[uint]int) []uint { return slices.Sorted(maps.Keys(m)) }
