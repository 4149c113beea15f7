package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/spec/skel"
)

// hostLocalConf is a host-local config on a /16, the data in dir.
func hostLocalConf(dir string) []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench","type":"host-local",
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.200.0.0/16"}]]}}`, dir))
}

func hostLocalArgs(cmd, id string) skel.Args {
	return skel.Args{Command: cmd, ContainerID: id, Netns: "/run/netns/cnibench-none", IfName: "eth0", Path: []string{"/nonexistent"}, Env: os.Environ()}
}

// hostLocal measures host-local on a /16 holding 0, 5,000 and 60,000 reservations:
// ADD and DEL in-process, ADD+DEL exec'd for every build taking turns on the same data
// directory (its format is the reference's), and GC of all the reservations, keeping
// them (the scan) and releasing them.
func (b *bench) hostLocal() error {
	levels := []int{0, 5000, 60000}
	if b.quick {
		levels = []int{0, 5000}
	}
	dir, err := os.MkdirTemp("", "cnibench-hostlocal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	conf := hostLocalConf(dir)
	plugin := hostlocal.Plugin()
	ctx := context.Background()
	invoke := func(cmd, id string, conf []byte) error {
		_, err := skel.Invoke(ctx, plugin, hostLocalArgs(cmd, id), conf, nil)
		return err
	}
	var dirs []string
	builds := b.allBuilds("host-local", "host-local")
	for _, bd := range builds {
		d, err := bd.pluginDir("host-local")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dirs = append(dirs, d)
	}
	filled := 0
	for _, level := range levels {
		for ; filled < level; filled++ {
			if err := invoke("ADD", fmt.Sprintf("fill%d", filled), conf); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		n := b.iterations(200)
		var add, del []time.Duration
		for i := range n {
			id := fmt.Sprintf("bench%d", i)
			start := time.Now()
			if err := invoke("ADD", id, conf); err != nil {
				return err
			}
			mid := time.Now()
			if err := invoke("DEL", id, conf); err != nil {
				return err
			}
			add, del = append(add, mid.Sub(start)), append(del, time.Since(mid))
		}
		b.recordFor(b.ours(), "host-local", fmt.Sprintf("ADD in-process, %d reservations", level), timing.MedianMs(add), "ms", "")
		b.target("≤ 1 ms (issue 29)")
		b.recordFor(b.ours(), "host-local", fmt.Sprintf("DEL in-process, %d reservations", level), timing.MedianMs(del), "ms", "")

		// Each build works on a copy of the data dir of its own: after the reference
		// changed a shared one, our next operation would find the index unsealed and
		// walk every reservation, which is what interop costs, not what an ADD costs.
		execd := make([][]time.Duration, len(builds))
		copies := make([][]byte, len(builds))
		for k := range builds {
			c, err := os.MkdirTemp("", "cnibench-hostlocal-copy-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(c)
			if err := copyTree(dir, c); err != nil {
				return err
			}
			copies[k] = hostLocalConf(c)
		}
		m := b.iterations(100)
		if level > 10_000 {
			// The reference's DEL reads every reservation file: seconds each here.
			m = b.iterations(20)
		}
		for i := range m {
			for _, k := range rotated(indexes(len(builds)), i) {
				id := fmt.Sprintf("exec%d", i)
				start := time.Now()
				for _, cmd := range []string{"ADD", "DEL"} {
					if err := runPlugin(filepath.Join(dirs[k], "host-local"), withPath(hostLocalArgs(cmd, id), dirs[k]), copies[k]); err != nil {
						return fmt.Errorf("%s: %w", builds[k].label, err)
					}
				}
				execd[k] = append(execd[k], time.Since(start))
			}
		}
		for k, bd := range builds {
			b.recordFor(bd, "host-local", fmt.Sprintf("ADD+DEL exec'd, %d reservations", level), timing.MedianMs(execd[k]), "ms", fmt.Sprintf("%d runs, in turn", m))
		}
		if level > 0 {
			if err := b.hostLocalGC(dir, level); err != nil {
				return err
			}
		}
	}
	return nil
}

// hostLocalGC times one in-process GC of the data dir holding the fill0… reservations:
// keeping all of them, then a copy of the dir released of all of them.
func (b *bench) hostLocalGC(dir string, level int) error {
	valid := make([]skel.Attachment, level)
	for i := range valid {
		valid[i] = skel.Attachment{ContainerID: fmt.Sprintf("fill%d", i), IfName: "eth0"}
	}
	gcConf := func(dir string, valid []skel.Attachment) ([]byte, error) {
		var c map[string]any
		if err := json.Unmarshal(hostLocalConf(dir), &c); err != nil {
			return nil, err
		}
		c["cni.dev/valid-attachments"] = valid
		return json.Marshal(c)
	}
	ctx := context.Background()
	keep, err := gcConf(dir, valid)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := skel.Invoke(ctx, hostlocal.Plugin(), hostLocalArgs("GC", ""), keep, nil); err != nil {
		return fmt.Errorf("GC: %w", err)
	}
	b.recordFor(b.ours(), "host-local", fmt.Sprintf("GC in-process keeping all %d reservations", level), timing.Ms(time.Since(start)), "ms", "one run")
	spare, err := os.MkdirTemp("", "cnibench-hostlocal-gc-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(spare)
	if err := copyTree(dir, spare); err != nil {
		return err
	}
	release, err := gcConf(spare, []skel.Attachment{})
	if err != nil {
		return err
	}
	start = time.Now()
	if _, err := skel.Invoke(ctx, hostlocal.Plugin(), hostLocalArgs("GC", ""), release, nil); err != nil {
		return fmt.Errorf("GC: %w", err)
	}
	b.recordFor(b.ours(), "host-local", fmt.Sprintf("GC in-process releasing all %d reservations", level), timing.Ms(time.Since(start)), "ms", "one run")
	if level == 60000 {
		b.target("≤ 2 s (issue 29)")
	}
	return nil
}

// copyTree copies the contents of src into dst with their modes and times (cp -a), so
// that a copied host-local dir keeps the seal of its index.
func copyTree(src, dst string) error {
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("copy of %s: %v: %s", src, err, out)
	}
	return nil
}

func withPath(a skel.Args, dir string) skel.Args {
	a.Path = []string{dir}
	return a
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// linkDir makes a plugin dir holding links to the binary under the given names.
func linkDir(bin string, names ...string) (string, error) {
	return linkEach(func(string) string { return bin }, names...)
}

// linkEach makes a fresh plugin directory with a symlink per name, to target(name).
func linkEach(target func(name string) string, names ...string) (string, error) {
	dir, err := os.MkdirTemp("", "cnibench-bin-")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if err := os.Symlink(target(n), filepath.Join(dir, n)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// runPlugin execs one plugin the way a runtime does.
func runPlugin(path string, a skel.Args, conf []byte) error {
	cmd := exec.Command(path)
	cmd.Env = a.Environ(a.Command)
	cmd.Stdin = bytes.NewReader(conf)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(path), a.Command, err, out.String())
	}
	return nil
}
