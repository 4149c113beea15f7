package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/logreport"
)

// logFilter selects log entries, for log and stats.
type logFilter struct {
	file                               string
	container, pod, namespace, network string
	plugin, command, trace             string
	errorsOnly                         bool
	since                              time.Duration
	now                                time.Time
}

func (f *logFilter) register(fs *flag.FlagSet, p Process) {
	fs.StringVar(&f.file, "file", p.envOr(invlog.EnvFile, ""), "the invocation log (env "+invlog.EnvFile+"); its rotated files FILE.N are read too")
	fs.StringVar(&f.container, "container", "", "only this container id (a prefix is enough)")
	fs.StringVar(&f.pod, "pod", "", "only this pod (K8S_POD_NAME in CNI_ARGS)")
	fs.StringVar(&f.namespace, "namespace", "", "only pods of this Kubernetes namespace (K8S_POD_NAMESPACE)")
	fs.StringVar(&f.network, "network", "", "only this network")
	fs.StringVar(&f.plugin, "plugin", "", "only this plugin")
	fs.StringVar(&f.command, "command", "", "only this command (ADD, DEL, CHECK, GC, STATUS)")
	fs.StringVar(&f.trace, "trace", "", "only this trace id (cni add --verbose prints it)")
	fs.BoolVar(&f.errorsOnly, "errors", false, "only failed invocations")
	fs.DurationVar(&f.since, "since", 0, "only invocations of the last DURATION (e.g. 1h)")
}

func (f *logFilter) match(e *invlog.Entry) bool {
	switch {
	case f.container != "" && !strings.HasPrefix(e.ContainerID, f.container),
		f.pod != "" && e.CNIArgs["K8S_POD_NAME"] != f.pod,
		f.namespace != "" && e.CNIArgs["K8S_POD_NAMESPACE"] != f.namespace,
		f.network != "" && e.Network != f.network,
		f.plugin != "" && e.Plugin != f.plugin,
		f.command != "" && !strings.EqualFold(e.Command, f.command),
		f.trace != "" && e.TraceID != f.trace,
		f.errorsOnly && !e.Failed(),
		f.since > 0 && e.Time.Before(f.now.Add(-f.since)):
		return false
	}
	return true
}

// read runs fn on each matching entry; unreadable lines are reported on stderr.
func (f *logFilter) read(ctx context.Context, p Process, follow bool, fn func(*invlog.Entry, []byte) error) (bad int, err error) {
	f.now = time.Now()
	if !logExists(f.file) {
		// Not an error (a node whose plugins have not run yet has no log), but a
		// mistyped path would otherwise look like a node where nothing happened.
		fmt.Fprintf(p.Stderr, "cni: %s: no log there yet (nothing has written to it; is this the path of the log object or %s?)\n", f.file, invlog.EnvFile)
	}
	r := &invlog.Reader{Path: f.file, Follow: follow}
	err = r.Read(ctx, func(e *invlog.Entry, line []byte) error {
		if !f.match(e) {
			return nil
		}
		return fn(e, line)
	})
	if r.Bad > 0 {
		fmt.Fprintf(p.Stderr, "cni: %s: %d line(s) are no log entry (torn or foreign), skipped\n", f.file, r.Bad)
	}
	for _, ferr := range r.Foreign {
		fmt.Fprintf(p.Stderr, "cni: skipped %v\n", ferr)
	}
	return r.Bad, err
}

// logExists reports whether the log or any of its rotated files is there.
func logExists(path string) bool {
	if _, err := os.Lstat(path); err == nil {
		return true
	}
	rotated, err := invlog.Rotated(path)
	return err != nil || len(rotated) > 0
}

// runLog is `cni log`: the invocation log's lines, filtered, as a table, as written
// (--json) or as OTLP/JSON spans (--otlp).
func runLog(p Process, args []string) int {
	fs := newFlagSet(p, "log", "[flags]")
	var f logFilter
	f.register(fs, p)
	follow := fs.Bool("f", false, "follow: go on printing lines as they are written, across rotations")
	fs.BoolVar(follow, "follow", false, "the same as -f")
	asJSON := fs.Bool("json", false, "print the lines as written (one JSON object per line)")
	otlp := fs.Bool("otlp", false, "print each traced line as an OTLP/JSON ExportTraceServiceRequest, one per line")
	withSteps := fs.Bool("steps", false, "print each invocation's steps under it")
	if code, ok := parseLogArgs(p, fs, args); !ok {
		return code
	}
	ctx, stop := p.untilStopped()
	defer stop()
	if !*asJSON && !*otlp {
		fmt.Fprintf(p.Stdout, logRowFormat, "TIME", "COMMAND", "PLUGIN", "NETWORK", "CONTAINER", "POD", "MS", "RESULT")
	}
	untraced := false
	_, err := f.read(ctx, p, *follow, func(e *invlog.Entry, line []byte) error {
		switch {
		case *asJSON:
			_, err := fmt.Fprintf(p.Stdout, "%s\n", line)
			return err
		case *otlp:
			if b, ok := logreport.OTLP(e); ok {
				_, err := fmt.Fprintf(p.Stdout, "%s\n", b)
				return err
			}
			// Said once, as it happens (-f may run for days): under a runtime that
			// passes no trace context, every line is skipped, and silence would look
			// like an empty log.
			if !untraced {
				untraced = true
				fmt.Fprintf(p.Stderr, "cni log: lines without a trace context (no %s from the runtime) have no span to export; they are skipped\n", tracectx.EnvTraceparent)
			}
			return nil
		}
		return writeLogRow(p.Stdout, e, *withSteps)
	})
	if err != nil {
		return p.fail("log", err)
	}
	return ExitOK
}

// parseLogArgs parses flags of a command that takes no positional argument and needs a
// log file; ok false means return code.
func parseLogArgs(p Process, fs *flag.FlagSet, args []string) (code int, ok bool) {
	if code, ok := parseNoArgs(p, fs, args); !ok {
		return code, false
	}
	if fs.Lookup("file").Value.String() == "" {
		return p.usageError(fs, "no log file: give --file or set %s", invlog.EnvFile), false
	}
	return 0, true
}

const logRowFormat = "%-23s %-7s %-11s %-16s %-12s %-24s %8s  %s\n"

// writeLogRow prints one entry as a table row, and its steps under it when asked.
func writeLogRow(w io.Writer, e *invlog.Entry, withSteps bool) error {
	pod := e.CNIArgs["K8S_POD_NAME"]
	if ns := e.CNIArgs["K8S_POD_NAMESPACE"]; ns != "" && pod != "" {
		pod = ns + "/" + pod
	}
	var b strings.Builder
	fmt.Fprintf(&b, logRowFormat, e.Time.Local().Format("2006-01-02 15:04:05.000"), e.Command, short(e.Plugin, 11),
		short(e.Network, 16), short(e.ContainerID, 12), short(pod, 24), fmt.Sprintf("%.1f", e.DurationMs), outcome(e))
	if withSteps {
		for _, s := range e.Steps {
			line := fmt.Sprintf("    %-16s %9.2f ms  at +%.2f ms", s.Name, s.DurationMs, s.StartMs)
			if s.Error != "" {
				line += "  failed: " + oneLine(s.Error)
			}
			b.WriteString(line + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// outcome is a row's RESULT: the first address of an ADD, or the error with its code
// and the step it failed in.
func outcome(e *invlog.Entry) string {
	if e.Error != nil {
		s := fmt.Sprintf("error %d: %s", e.Error.Code, oneLine(e.Error.Msg))
		if st := e.FailedStep(); st != nil {
			s += fmt.Sprintf(" (in %s, %.1f ms)", st.Name, st.DurationMs)
		}
		return s
	}
	if e.Result != nil && len(e.Result.IPs) > 0 {
		ips := make([]string, len(e.Result.IPs))
		for i, ip := range e.Result.IPs {
			ips[i] = ip.Address
		}
		return "ok " + strings.Join(ips, ",")
	}
	return "ok"
}

func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " ") }

// runStats is `cni stats`: count, p50/p90/p99 duration and errors per code by plugin and
// command, as a table or in the Prometheus text format.
func runStats(p Process, args []string) int {
	fs := newFlagSet(p, "stats", "[flags]")
	var f logFilter
	f.register(fs, p)
	prom := fs.Bool("prometheus", false, "print the Prometheus text format (metrics cni_*), for node-exporter's textfile collector")
	if code, ok := parseLogArgs(p, fs, args); !ok {
		return code
	}
	var s logreport.Stats
	bad, err := f.read(context.Background(), p, false, func(e *invlog.Entry, _ []byte) error {
		s.Add(e)
		return nil
	})
	if err != nil {
		return p.fail("stats", err)
	}
	if *prom {
		err = s.WritePrometheus(p.Stdout, bad)
	} else {
		err = s.WriteTable(p.Stdout)
	}
	if err != nil {
		return p.fail("stats", err)
	}
	return ExitOK
}
