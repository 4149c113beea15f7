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
	args := []string{"-cni", b.bin, "-n", strconv.Itoa(b.iterations(30))}
	if b.ref != "" {
		args = append(args, "-ref", b.ref)
	}
	return b.runTool("containerd", "cri-bench", args)
}

// crio is the crio section: the containerd section's pods and arms through CRI-O's CRI
// (CRI-O's RunPodSandbox includes the CHECK it runs after every ADD), its list at
// cniVersion 1.1.0. cri-bench -crio runs make's CRI-O builds from beside the cni
// binary (bin/crio, bin/pinns, bin/crio-load, bin/crio-runc).
func (b *bench) crio() error {
	args := []string{"-cni", b.bin, "-n", strconv.Itoa(b.iterations(30)), "-crio", b.binDir}
	if b.ref != "" {
		args = append(args, "-ref", b.ref)
	}
	return b.runTool("crio", "cri-bench", args)
}

// cluster is the cluster section: pods per second across a lab of three nodes (etcd,
// flanneld, containerd) through the CRI, ours as the flannel profile's DaemonSet
// installs it, -base the same way, and the reference plugins as flannel's manifest
// installs them (-ref, which must then hold a flannel plugin). It runs
// tools/cmd/cluster-bench, which make bench builds beside the cni binary with flanneld.
func (b *bench) cluster() error {
	args := []string{"-cni", b.bin, "-n", strconv.Itoa(b.iterations(10)),
		"-flanneld", filepath.Join(b.binDir, "flanneld")}
	if b.base != "" {
		args = append(args, "-base", b.base)
	}
	if b.ref != "" {
		args = append(args, "-ref", b.ref)
	}
	return b.runTool("cluster", "cluster-bench", args)
}

// runTool runs one of the tools module's benchmarks from the bin dir with the pause
// binary, and records the figures it prints as JSON.
func (b *bench) runTool(section, tool string, args []string) error {
	bin, pause := filepath.Join(b.binDir, tool), filepath.Join(b.binDir, "pause")
	for _, p := range []string{bin, pause} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w (make bench builds it from tools/cmd)", err)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, append(args, "-pause", pause)...)
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	var figs []struct {
		Name, Unit, Note, Target string
		Value                    float64
	}
	if err := json.Unmarshal(out.Bytes(), &figs); err != nil {
		return fmt.Errorf("%s's figures: %w", tool, err)
	}
	for _, f := range figs {
		b.record(section, f.Name, f.Value, f.Unit, f.Note)
		if f.Target != "" {
			b.target(f.Target)
		}
	}
	return nil
}
