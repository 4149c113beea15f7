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
