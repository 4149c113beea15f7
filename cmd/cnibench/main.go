// Command cnibench is the project's performance record (`make bench`): it measures the
// figures a node operator cares about, the same way every run, inside throwaway network
// namespaces, prints a table and writes the same figures as JSON. It is a development
// tool, not part of the shipped binary, and so may use libcni as an independent client.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	bin := flag.String("bin", "bin/cni", "the cni binary to measure (build with make build)")
	out := flag.String("out", "bin/bench.json", "where to write the JSON record")
	only := flag.String("only", "", "comma-separated section names to run (default: all)")
	quick := flag.Bool("quick", false, "fewer iterations (a smoke run)")
	base := flag.String("base", "", "another build of cni (before a change) measured beside this one in every section, the two taking turns operation by operation")
	ref := flag.String("ref", "", "a directory of reference plugin binaries (loopback, bridge, host-local, portmap, bandwidth; flannel, macvlan, host-device for their sections) to measure beside ours")
	flag.Parse()

	abs, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	b := &bench{bin: abs, binDir: filepath.Dir(abs), quick: *quick}
	if *base != "" {
		if b.base, err = filepath.Abs(*base); err != nil {
			fatal(err)
		}
		if _, err := os.Stat(b.base); err != nil {
			fatal(fmt.Errorf("-base: %w", err))
		}
	}
	if *ref != "" {
		if b.ref, err = filepath.Abs(*ref); err != nil {
			fatal(err)
		}
		for _, name := range chainPlugins {
			if _, err := os.Stat(filepath.Join(b.ref, name)); err != nil {
				fatal(fmt.Errorf("-ref: %w", err))
			}
		}
	}
	if os.Geteuid() != 0 {
		fatal(fmt.Errorf("must run as root: it creates network namespaces"))
	}
	staged, err := b.stage()
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(staged)
	fmt.Printf("cnibench: %s, %d cores, kernel %s, %s\n", abs, runtime.NumCPU(), kernelRelease(), runtime.Version())
	for _, s := range b.sections() {
		if *only != "" && !strings.Contains(","+*only+",", ","+s.name+",") {
			continue
		}
		start := time.Now()
		if err := s.run(); err != nil {
			b.record(s.name, "error", 0, "", err.Error())
			fmt.Printf("  %s: error: %v\n", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "  (%s took %s)\n", s.name, time.Since(start).Round(time.Millisecond))
	}
	b.printTable(os.Stdout)
	if err := b.writeJSON(*out); err != nil {
		os.RemoveAll(staged)
		fatal(err)
	}
	fmt.Printf("\nJSON record: %s\n", *out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cnibench:", err)
	os.Exit(1)
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// figure is one measured number.
type figure struct {
	Section string `json:"section"`
	Name    string `json:"name"`
	// Build is which implementation the figure measures ("ours", "base", "reference")
	// when the section measured several side by side; the table pairs figures of one
	// name across builds.
	Build  string  `json:"build,omitempty"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Note   string  `json:"note,omitempty"`
	Target string  `json:"target,omitempty"`
}

type section struct {
	name string
	run  func() error
}

type bench struct {
	bin     string
	binDir  string // the directory of -bin as given (bin/cri-bench lives there), before stage copies -bin
	base    string // a build measured beside this one in every section, "" when not compared
	ref     string // reference plugins' directory, "" when not compared
	quick   bool
	figures []figure
}

func (b *bench) record(section, name string, value float64, unit, note string) {
	b.figures = append(b.figures, figure{Section: section, Name: name, Value: value, Unit: unit, Note: note})
}

// recordFor records a figure of one build among several measured side by side.
func (b *bench) recordFor(bd build, section, name string, value float64, unit, note string) {
	b.figures = append(b.figures, figure{Section: section, Name: name, Build: bd.label, Value: value, Unit: unit, Note: note})
}

func (b *bench) target(t string) {
	if n := len(b.figures); n > 0 {
		b.figures[n-1].Target = t
	}
}

func (b *bench) iterations(full int) int {
	if b.quick {
		return max(full/10, 5)
	}
	return full
}

func (b *bench) printTable(w *os.File) {
	fmt.Fprintf(w, "\n%-14s %-58s %12s  %-8s %s\n", "section", "figure", "value", "unit", "target / note")
	last := ""
	for _, f := range b.figures {
		sec := f.Section
		if sec == last {
			sec = ""
		}
		last = f.Section
		extra := f.Target
		if f.Note != "" {
			extra = strings.TrimSpace(extra + "  " + f.Note)
		}
		name := f.Name
		if f.Build != "" {
			name += " [" + f.Build + "]"
		}
		fmt.Fprintf(w, "%-14s %-58s %12.3f  %-8s %s\n", sec, name, f.Value, f.Unit, extra)
	}
	b.printPairs(w)
}

// printPairs lists every figure measured for ours beside its -base and reference
// counterparts, as ratios: the one table a reviewer reads to see what a change moved.
func (b *bench) printPairs(w *os.File) {
	type key struct{ section, name string }
	by := map[key]map[string]float64{}
	var order []key
	for _, f := range b.figures {
		if f.Build == "" || f.Unit == "x" || f.Unit == "ratio" {
			continue
		}
		k := key{f.Section, f.Name}
		if by[k] == nil {
			by[k] = map[string]float64{}
			order = append(order, k)
		}
		by[k][f.Build] = f.Value
	}
	header := false
	for _, k := range order {
		v := by[k]
		ours, ok := v[labelOurs]
		if !ok || ours == 0 {
			continue
		}
		base, hasBase := v[labelBase]
		ref, hasRef := v[labelRef]
		if !hasBase && !hasRef {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\npaired (same run, taking turns): ours against -base and the reference\n")
			fmt.Fprintf(w, "%-14s %-58s %10s %10s  %s\n", "section", "figure", "ours/base", "ours/ref", "")
			header = true
		}
		cell := func(has bool, other float64) string {
			if !has || other == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", ours/other)
		}
		flag := ""
		if hasBase && base > 0 && (ours/base > 1.10 || ours/base < 0.90) {
			flag = "moved > 10 % against -base"
		}
		fmt.Fprintf(w, "%-14s %-58s %10s %10s  %s\n", k.section, k.name, cell(hasBase, base), cell(hasRef, ref), flag)
	}
}

func (b *bench) writeJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	rec := struct {
		When    time.Time `json:"when"`
		Cores   int       `json:"cores"`
		Kernel  string    `json:"kernel"`
		Go      string    `json:"go"`
		Figures []figure  `json:"figures"`
	}{time.Now().UTC(), runtime.NumCPU(), kernelRelease(), runtime.Version(), b.figures}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
