package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/cnikit/cni/internal/timing"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cnikit/cni/internal/ipam/hostlocal"
	"github.com/cnikit/cni/internal/skel"
)

// hostLocal measures one ADD+DEL pair of host-local, in-process and exec'd, on an empty
// network and on one already holding 5,000 reservations.
func (b *bench) hostLocal() error {
	for _, existing := range []int{0, 5000} {
		dir, err := os.MkdirTemp("", "cnibench-hostlocal-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		conf := []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench","type":"host-local",
			"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.200.0.0/16"}]]}}`, dir))
		plugin := hostlocal.Plugin()
		args := func(cmd, id string) skel.Args {
			return skel.Args{Command: cmd, ContainerID: id, Netns: "/run/netns/cnibench-none", IfName: "eth0", Path: []string{dir}, Env: os.Environ()}
		}
		ctx := context.Background()
		for i := 0; i < existing; i++ {
			if _, err := skel.Invoke(ctx, plugin, args("ADD", fmt.Sprintf("fill%d", i)), conf, nil); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		n := b.iterations(200)
		var inproc []time.Duration
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("bench%d", i)
			start := time.Now()
			if _, err := skel.Invoke(ctx, plugin, args("ADD", id), conf, nil); err != nil {
				return err
			}
			if _, err := skel.Invoke(ctx, plugin, args("DEL", id), conf, nil); err != nil {
				return err
			}
			inproc = append(inproc, time.Since(start))
		}
		b.record("host-local", fmt.Sprintf("ADD+DEL in-process, %d reservations", existing), timing.MedianMs(inproc), "ms", "")
		b.target("<= 1 ms")

		pluginDir, err := linkDir(b.bin, "host-local")
		if err != nil {
			return err
		}
		defer os.RemoveAll(pluginDir)
		var execd []time.Duration
		for i := 0; i < b.iterations(100); i++ {
			id := fmt.Sprintf("exec%d", i)
			start := time.Now()
			for _, cmd := range []string{"ADD", "DEL"} {
				if err := runPlugin(filepath.Join(pluginDir, "host-local"), args(cmd, id), conf); err != nil {
					return err
				}
			}
			execd = append(execd, time.Since(start))
		}
		b.record("host-local", fmt.Sprintf("ADD+DEL exec'd, %d reservations", existing), timing.MedianMs(execd), "ms", "")
		b.target("<= 3 ms")
	}
	return nil
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
