package main

import (
	"bytes"
	"fmt"
	"github.com/cnikit/cni/internal/timing"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// startup measures VERSION exec'd under a plugin name against an empty Go program built
// the same way, so the figure separates our start-up cost from Go's.
func (b *bench) startup() error {
	dir, err := os.MkdirTemp("", "cnibench-startup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	link := filepath.Join(dir, "loopback")
	if err := os.Symlink(b.bin, link); err != nil {
		return err
	}
	empty, err := buildEmptyProgram(dir)
	if err != nil {
		return err
	}
	n := b.iterations(300)
	type candidate struct {
		name, path string
		env        []string
	}
	candidates := []candidate{
		{"VERSION exec'd as loopback", link, []string{"CNI_COMMAND=VERSION"}},
		{"empty Go program (baseline)", empty, nil},
	}
	if b.ref != "" {
		candidates = append(candidates, candidate{"reference loopback VERSION", filepath.Join(b.ref, "loopback"), []string{"CNI_COMMAND=VERSION"}})
	}
	for _, c := range candidates {
		var d []time.Duration
		for i := 0; i < n+10; i++ {
			start := time.Now()
			cmd := exec.Command(c.path)
			cmd.Env = c.env
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			if i >= 10 { // warm-up runs are not counted
				d = append(d, time.Since(start))
			}
		}
		b.record("startup", c.name+" median", timing.MedianMs(d), "ms", fmt.Sprintf("%d runs", n))
		if c.path == link {
			b.target("<= 2.5 ms")
		}
		b.record("startup", c.name+" p90", timing.Ms(timing.Quantile(d, 0.9)), "ms", "")
	}
	if b.base != "" {
		return b.startupPaired(dir)
	}
	return nil
}

// startupPaired execs VERSION as bridge from -bin and from -base in alternation (one
// pair at a time, the pair's order flipped every time), so that both builds see the
// same machine from moment to moment: a difference of a few per cent is visible only
// this way, the exec time of either moving by ±10 % between runs.
func (b *bench) startupPaired(dir string) error {
	var links [2]string
	for i, bin := range []string{b.bin, b.base} {
		sub := filepath.Join(dir, fmt.Sprintf("paired%d", i))
		links[i] = filepath.Join(sub, "bridge")
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
		if err := os.Symlink(bin, links[i]); err != nil {
			return err
		}
	}
	n := b.iterations(300)
	var d [2][]time.Duration
	var diff [2][]time.Duration // this minus -base, by which of the two ran first
	for i := 0; i < n+10; i++ {
		var pair [2]time.Duration
		for k := range 2 {
			which := k ^ (i & 1)
			start := time.Now()
			cmd := exec.Command(links[which])
			cmd.Env = []string{"CNI_COMMAND=VERSION"}
			if out, err := cmd.Output(); err != nil {
				return fmt.Errorf("%s VERSION: %v: %s", links[which], err, out)
			}
			pair[which] = time.Since(start)
		}
		if i >= 10 { // warm-up pairs are not counted
			d[0], d[1] = append(d[0], pair[0]), append(d[1], pair[1])
			diff[i&1] = append(diff[i&1], pair[0]-pair[1])
		}
	}
	// The second exec of a pair may gain or lose from following the first; the mean of
	// the two orders' median differences cancels that.
	delta := (timing.MedianMs(diff[0]) + timing.MedianMs(diff[1])) / 2
	note := fmt.Sprintf("%d pairs", n)
	b.record("startup", "paired: bridge VERSION exec'd, this build median", timing.MedianMs(d[0]), "ms", note)
	b.record("startup", "paired: bridge VERSION exec'd, -base build median", timing.MedianMs(d[1]), "ms", note)
	b.record("startup", "paired: this minus -base (median difference, both orders)", delta, "ms",
		fmt.Sprintf("this first %+.3f, -base first %+.3f", timing.MedianMs(diff[0]), timing.MedianMs(diff[1])))
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

// size reports the stripped binary and the peak RSS of one exec'd plugin ADD.
func (b *bench) size() error {
	st, err := os.Stat(b.bin)
	if err != nil {
		return err
	}
	b.record("size", "binary, all plugins, stripped", float64(st.Size())/1e6, "MB", "")
	b.target("<= 12 MB")
	if b.base != "" {
		bst, err := os.Stat(b.base)
		if err != nil {
			return err
		}
		b.record("size", "-base binary", float64(bst.Size())/1e6, "MB", "")
		b.record("size", "this minus -base", float64(st.Size()-bst.Size())/1e6, "MB", "")
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
