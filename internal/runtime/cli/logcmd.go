package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/obs/invlog"
	"github.com/cnikit/cni/internal/obs/logreport"
)

// logFilter selects log entries, for log and stats.
type logFilter struct {
	file, confDir string
	// fileFrom says where file came from, for the message about a log not there.
	fileFrom                           string
	container, pod, namespace, network string
	plugin, command, trace             string
	errorsOnly                         bool
	since                              time.Duration
	now                                time.Time
}

func (f *logFilter) register(fs *flag.FlagSet, p Process) {
	fs.StringVar(&f.file, "file", p.envOr(invlog.EnvFile, ""), "the invocation log (env "+invlog.EnvFile+"; default: the log.file of the conf dir's configs, else "+DefaultLogFile+"); its rotated files FILE.N are read too")
	fs.StringVar(&f.confDir, "conf-dir", p.envOr("NETCONFPATH", chain.DefaultConfDir), "network config dir whose log objects name the log when --file and "+invlog.EnvFile+" do not (env NETCONFPATH)")
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
		fmt.Fprintf(p.Stderr, "cni: %s (%s): no log there yet (nothing has written to it; is this the path of the log object or %s?)\n", f.file, f.fileFrom, invlog.EnvFile)
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
	if code, ok := parseLogArgs(p, fs, &f, args); !ok {
		return code
	}
	ctx, stop := p.untilStopped()
	defer stop()
	if !*asJSON && !*otlp {
		if _, err := fmt.Fprintf(p.Stdout, logRowFormat, "TIME", "CMD", "PLUGIN", "NETWORK", "POD/CONTAINER", "MS", "RESULT"); err != nil {
			return p.fail("log", err)
		}
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

// parseLogArgs parses flags of a command that takes no positional argument and reads
// the log, and finds the log; ok false means return code.
func parseLogArgs(p Process, fs *flag.FlagSet, f *logFilter, args []string) (code int, ok bool) {
	if _, code, ok := parseArgs(p, fs, args, "", 0, 0); !ok {
		return code, false
	}
	if err := f.findFile(fs); err != nil {
		return p.usageError(fs, "%v", err), false
	}
	return 0, true
}

// DefaultLogFile is the log `cni log` and `cni stats` read when neither --file,
// CNI_LOG_FILE nor a log object of the conf dir names one: the path
// docs/observability.md gives CNI_LOG_FILE in a runtime's environment.
const DefaultLogFile = "/var/log/cni/invocations.log"

// findFile settles which log to read: --file, else CNI_LOG_FILE (the flag's default),
// else the file the log objects of the conf dir's configs name, as the plugins
// themselves find it, else DefaultLogFile. Configs naming several files are an error
// naming them: which one is meant is the operator's to say.
func (f *logFilter) findFile(fs *flag.FlagSet) error {
	if f.file != "" {
		f.fileFrom = "--file"
		if !flagSet(fs, "file") {
			f.fileFrom = invlog.EnvFile
		}
		return nil
	}
	found, err := confLogFiles(f.confDir)
	if err != nil {
		return err
	}
	switch len(found) {
	case 0:
		f.file, f.fileFrom = DefaultLogFile, "the default: no --file, "+invlog.EnvFile+" or log object in "+f.confDir
	case 1:
		f.file, f.fileFrom = found[0].file, "log.file of "+found[0].conf
	default:
		var names []string
		for _, l := range found {
			names = append(names, l.file+" ("+l.conf+")")
		}
		return fmt.Errorf("the configs of %s log to %d files, give one with --file: %s", f.confDir, len(found), strings.Join(names, ", "))
	}
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// confLog is a log file a config names, and the config's file.
type confLog struct{ file, conf string }

// confLogFiles lists the distinct files the log objects of dir's configs name: of each
// plugin, and of the children of a chain plugin. A config a runtime could not load is
// skipped, as the runtime skips it.
func confLogFiles(dir string) ([]confLog, error) {
	entries, err := chain.List(dir)
	if err != nil {
		return nil, fmt.Errorf("finding the log in %s: %w", dir, err)
	}
	var out []confLog
	for _, e := range entries {
		if e.Err != nil {
			continue
		}
		for _, pc := range e.Network.Plugins {
			out = appendLogFiles(out, e.File, pc)
		}
	}
	return out, nil
}

// appendLogFiles appends the log file of the plugin object, and of its children when it
// is a chain plugin (chain.Children, as the runner reads them), unless out has it
// already.
func appendLogFiles(out []confLog, conf string, pc chain.PluginConf) []confLog {
	var c struct {
		Log struct {
			File string `json:"file"`
		} `json:"log"`
	}
	if json.Unmarshal(pc.Bytes, &c) == nil && c.Log.File != "" &&
		!slices.ContainsFunc(out, func(l confLog) bool { return l.file == c.Log.File }) {
		out = append(out, confLog{c.Log.File, conf})
	}
	if pc.Type == chain.PluginName {
		children, _ := chain.Children(pc) // an unusable list runs no child: none logs
		for _, child := range children {
			out = appendLogFiles(out, conf, child)
		}
	}
	return out
}

// The table fits a terminal of logWidth columns: an entry is one row, and only what
// cannot fit (a failure's message, a result with several addresses, a failed step's
// error) goes on indented lines under it, wrapped at word boundaries.
const (
	logWidth     = 100
	logRowFormat = "%-18s %-6s %-11s %-15s %-17s %6s  %s\n"
	// resultColumn is where RESULT starts; the rest of the line is its own.
	resultColumn  = 18 + 1 + 6 + 1 + 11 + 1 + 15 + 1 + 17 + 1 + 6 + 2
	logTimeFormat = "01-02 15:04:05.000"
)

// writeLogRow prints one entry as a table row, and its steps under it when asked.
func writeLogRow(w io.Writer, e *invlog.Entry, withSteps bool) error {
	who := cmp.Or(podColumn(e.CNIArgs["K8S_POD_NAMESPACE"], e.CNIArgs["K8S_POD_NAME"], 17), short(e.ContainerID, 17))
	var b strings.Builder
	summary, rest := outcome(e)
	first, more := wrapWords(summary, logWidth-resultColumn, logWidth-4)
	fmt.Fprintf(&b, logRowFormat, e.Time.Local().Format(logTimeFormat), e.Command, short(e.Plugin, 11),
		short(e.Network, 15), who, millis(e.DurationMs), first)
	writeIndented(&b, 4, more)
	if rest != "" {
		_, lines := wrapWords(rest, 0, logWidth-4)
		writeIndented(&b, 4, lines)
	}
	if withSteps {
		for _, s := range e.Steps {
			fmt.Fprintf(&b, "    %-16s %9.2f ms  at +%.2f ms\n", s.Name, s.DurationMs, s.StartMs)
			if s.Error != "" {
				_, lines := wrapWords("failed: "+oneLine(s.Error), 0, logWidth-8)
				writeIndented(&b, 8, lines)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// millis is a duration for the MS column: tenths of a millisecond below a second, whole
// milliseconds above (a 16-minute call still fits).
func millis(ms float64) string {
	if ms < 999.95 {
		return fmt.Sprintf("%.1f", ms)
	}
	return fmt.Sprintf("%.0f", ms)
}

// outcome is a row's RESULT: the addresses of an ADD, or a failure's code; and for a
// failure, what goes under the row: the step it failed in and the message.
func outcome(e *invlog.Entry) (summary, detail string) {
	if e.Error != nil {
		detail = oneLine(e.Error.Msg)
		if st := e.FailedStep(); st != nil {
			detail = fmt.Sprintf("in %s after %.1f ms: %s", st.Name, st.DurationMs, detail)
		}
		return fmt.Sprintf("error %d", e.Error.Code), detail
	}
	if e.Result != nil && len(e.Result.IPs) > 0 {
		ips := make([]string, len(e.Result.IPs))
		for i, ip := range e.Result.IPs {
			ips[i] = ip.Address
		}
		return "ok " + strings.Join(ips, " "), ""
	}
	return "ok", ""
}

// wrapWords splits text at spaces into a first line of at most first columns (empty
// when the first word does not fit there) and further lines of at most width columns;
// a word longer than width is cut.
func wrapWords(text string, first, width int) (string, []string) {
	var lines []string
	line, limit := "", first
	flush := func() { lines, line, limit = append(lines, line), "", width }
	for _, word := range strings.Fields(text) {
		for utf8.RuneCountInString(word) > width { // no line holds it: cut it
			if line != "" || limit < width {
				flush()
				continue
			}
			cut := string([]rune(word)[:width])
			line, word = cut, word[len(cut):]
			flush()
		}
		n := utf8.RuneCountInString(word)
		if line == "" && n > limit || line != "" && utf8.RuneCountInString(line)+1+n > limit {
			flush()
		}
		if line == "" {
			line = word
		} else {
			line += " " + word
		}
	}
	lines = append(lines, line)
	return lines[0], lines[1:]
}

// writeIndented writes each line indented by n spaces.
func writeIndented(b *strings.Builder, n int, lines []string) {
	for _, l := range lines {
		b.WriteString(strings.Repeat(" ", n) + l + "\n")
	}
}

// podColumn is namespace/name in n columns, "" without a name. What must be cut is cut
// from the namespace first: the name tells pods apart.
func podColumn(ns, name string, n int) string {
	full := name
	if ns != "" && name != "" {
		full = ns + "/" + name
	}
	room := n - 1 - utf8.RuneCountInString(name) // for the namespace, when the name fits whole
	switch {
	case utf8.RuneCountInString(full) <= n || ns == "":
		return short(full, n)
	case room >= 2:
		return short(ns, room) + "/" + name
	}
	return short(ns, 2) + "/" + short(name, n-3)
}

// short cuts s to n columns, the last one an ellipsis when it was cut.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " ") }

// runStats is `cni stats`: count, p50/p90/p99 duration and errors per code by plugin and
// command, as a table or in the Prometheus text format.
func runStats(p Process, args []string) int {
	fs := newFlagSet(p, "stats", "[flags]")
	var f logFilter
	f.register(fs, p)
	prom := fs.Bool("prometheus", false, "print the Prometheus text format (metrics cni_*), for node-exporter's textfile collector")
	if code, ok := parseLogArgs(p, fs, &f, args); !ok {
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
