package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// containerd is the containerd section: RunPodSandbox and Stop+Remove of a pod as
// kubelet times them through the CRI of Debian's containerd, for a host network pod, the
// reference's four plugins (with -ref), ours as four plugins and as one chain plugin.
// It runs tools/cmd/cri-bench, which make bench builds beside the cni binary (as
// bin/cri-bench, with bin/pause): the CRI client's gRPC stays out of this module.
func (b *bench) containerd() error {
	dir := b.binDir
	tool, pause := filepath.Join(dir, "cri-bench"), filepath.Join(dir, "pause")
	for _, p := range []string{tool, pause} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (make bench builds it from tools/cmd)", err)
		}
	}
	args := []string{"-cni", b.bin, "-pause", pause, "-n", strconv.Itoa(b.iterations(30))}
	if b.ref != "" {
		args = append(args, "-ref", b.ref)
	}
	var out bytes.Buffer
	cmd := exec.Command(tool, args...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cri-bench: %w", err)
	}
	var figs []struct {
		Name, Unit, Note, Target string
		Value                    float64
	}
	if err := json.Unmarshal(out.Bytes(), &figs); err != nil {
		return fmt.Errorf("cri-bench's figures: %w", err)
	}
	for _, f := range figs {
		b.record("containerd", f.Name, f.Value, f.Unit, f.Note)
		if f.Target != "" {
			b.target(f.Target)
		}
	}
	return nil
}
