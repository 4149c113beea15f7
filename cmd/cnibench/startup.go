package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execCandidate is one program exec'd in turn with the others of a startup figure.
type execCandidate struct {
	bd    build // zero for the empty Go program
	label string
	path  string
	env   []string
	stdin []byte
	// times, minor page faults and CPU time (user+system) of the counted execs
	wall, cpu []time.Duration
	faults    []int64
}

func (c *execCandidate) run() error {
	cmd := exec.Command(c.path)
	cmd.Env = c.env
	cmd.Stdin = bytes.NewReader(c.stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", c.label, err, out.String())
	}
	c.wall = append(c.wall, time.Since(start))
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		c.faults = append(c.faults, ru.Minflt)
		c.cpu = append(c.cpu, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
	}
	return nil
}

// pairedExecs execs the candidates n times each (after 10 uncounted rounds), one round
// at a time, who goes first rotating, so that every build sees the same machine from
// moment to moment: a difference of a few per cent is visible only this way, the exec
// time of either moving by ±10 % between runs.
func pairedExecs(cands []*execCandidate, n int) error {
	for i := range n + 10 {
		for _, c := range rotated(cands, i) {
			if err := c.run(); err != nil {
				return err
			}
			if i < 10 {
				c.wall, c.cpu, c.faults = nil, nil, nil
			}
		}
	}
	return nil
}

func medianInt(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return float64(slices.Sorted(slices.Values(xs))[(len(xs)-1)/2])
}

// startup measures VERSION exec'd under a plugin name for every build and the
// reference's loopback, beside an empty Go program built the same way (the floor of any
// Go plugin's start on the machine at that moment), and loopback ADD exec'd, the one
// plugin every pod of containerd runs; all of them in turn.
func (b *bench) startup() error {
	dir, err := os.MkdirTemp("", "cnibench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	empty, err := buildEmptyProgram(dir)
	if err != nil {
		return err
	}
	var version, add []*execCandidate
	ctr, err := testns.Create()
	if err != nil {
		return err
	}
	defer ctr.Close()
	for i, bd := range b.allBuilds("startup", "loopback") {
		path := bd.path("loopback")
		if !bd.isRef() {
			sub := filepath.Join(dir, fmt.Sprintf("build%d", i))
			path = filepath.Join(sub, "loopback")
			if err := os.Mkdir(sub, 0o755); err != nil {
				return err
			}
			if err := os.Symlink(bd.bin, path); err != nil {
				return err
			}
		}
		version = append(version, &execCandidate{bd: bd, label: bd.label, path: path, env: []string{"CNI_COMMAND=VERSION"}})
		add = append(add, &execCandidate{bd: bd, label: bd.label, path: path, stdin: []byte(`{"cniVersion":"1.1.0","name":"lo","type":"loopback"}`),
			env: []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=startup", "CNI_NETNS=" + ctr.Path, "CNI_IFNAME=lo", "CNI_PATH=" + dir}})
	}
	version = append(version, &execCandidate{label: "empty Go program", path: empty})
	n := b.iterations(300)
	for _, fig := range []struct {
		what  string
		cands []*execCandidate
	}{{"VERSION exec'd as loopback", version}, {"loopback ADD exec'd", add}} {
		if err := pairedExecs(fig.cands, n); err != nil {
			return err
		}
		note := fmt.Sprintf("%d runs, in turn", n)
		for _, c := range fig.cands {
			rec := func(name string, v float64, unit string) {
				if c.bd.label == "" {
					b.record("startup", c.label+" "+name, v, unit, note)
				} else {
					b.recordFor(c.bd, "startup", fig.what+" "+name, v, unit, note)
				}
			}
			rec("median", timing.MedianMs(c.wall), "ms")
			if c.bd.label == labelOurs && fig.what == "VERSION exec'd as loopback" {
				b.target("≤ the reference loopback's (issue 29)")
			}
			rec("p90", timing.Ms(timing.Quantile(c.wall, 0.9)), "ms")
			rec("CPU time median", timing.MedianMs(c.cpu), "ms")
			rec("minor page faults median", medianInt(c.faults), "count")
		}
	}
	return b.inits(version, b.iterations(60))
}

// inits runs each candidate under GODEBUG=inittrace=1 and records the sum over packages
// of each package's median init time, and for ours the packages costing most: what runs
// before main, the part of start-up a build's imports decide.
func (b *bench) inits(cands []*execCandidate, n int) error {
	for _, c := range cands {
		by := map[string][]time.Duration{}
		for range n {
			cmd := exec.Command(c.path)
			cmd.Env = append(slices.Clone(c.env), "GODEBUG=inittrace=1")
			var trace bytes.Buffer
			cmd.Stderr = &trace
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s under inittrace: %v", c.label, err)
			}
			for _, line := range strings.Split(trace.String(), "\n") {
				// init internal/godebug @0.011 ms, 0.095 ms clock, 744 bytes, 16 allocs
				f := strings.Fields(line)
				if len(f) < 7 || f[0] != "init" || f[6] != "clock," {
					continue
				}
				if ms, err := strconv.ParseFloat(f[4], 64); err == nil {
					by[f[1]] = append(by[f[1]], time.Duration(ms*float64(time.Millisecond)))
				}
			}
		}
		type pkg struct {
			name string
			ms   float64
		}
		var pkgs []pkg
		total := 0.0
		for name, d := range by {
			m := timing.MedianMs(d)
			total += m
			pkgs = append(pkgs, pkg{name, m})
		}
		note := fmt.Sprintf("%d packages, %d runs", len(pkgs), n)
		if c.bd.label == "" {
			b.record("startup", c.label+" package inits (sum of medians)", total, "ms", note)
			continue
		}
		b.recordFor(c.bd, "startup", "package inits before main (sum of medians)", total, "ms", note)
		if c.bd.label != labelOurs {
			continue
		}
		slices.SortFunc(pkgs, func(x, y pkg) int { return cmp.Compare(y.ms, x.ms) })
		for _, p := range pkgs[:min(8, len(pkgs))] {
			b.record("startup", "  init of "+p.name+" [ours]", p.ms, "ms", "median")
		}
	}
	return nil
}

func buildEmptyProgram(dir string) (string, error) {
	src := filepath.Join(dir, "empty.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "empty")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the empty baseline: %v: %s", err, msg)
	}
	return out, nil
}

// size reports the stripped binary of each of our builds and the reference's plugins of
// the standard chain.
func (b *bench) size() error {
	for _, bd := range b.ourBuilds() {
		st, err := os.Stat(bd.bin)
		if err != nil {
			return err
		}
		b.recordFor(bd, "size", "binary, all plugins, stripped", float64(st.Size())/1e6, "MB", "")
		if bd.label == labelOurs {
			b.target("<= 12 MB")
		}
	}
	if b.ref != "" {
		var total int64
		for _, name := range chainPlugins {
			st, err := os.Stat(filepath.Join(b.ref, name))
			if err != nil {
				return err
			}
			total += st.Size()
		}
		b.record("size", fmt.Sprintf("reference: the %d plugins of the standard chain", len(chainPlugins)), float64(total)/1e6, "MB", "")
	}
	return nil
}

// maxRSS returns the peak resident set of a finished child, in MB.
func maxRSS(ps *os.ProcessState) float64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return float64(ru.Maxrss) / 1024
	}
	return 0
}
