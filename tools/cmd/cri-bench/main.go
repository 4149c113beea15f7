// Command cri-bench is make bench's containerd section, and with -crio its crio
// section: it starts one containerd (or CRI-O) node per arm (package crinode) and times, as kubelet sees them, RunPodSandbox and
// StopPodSandbox + RemovePodSandbox of a plain pod: host network (no CNI at all), the
// reference plugins' standard list (-ref), ours as the same four plugins, and ours as
// one chain plugin. The arms alternate pod by pod, so that the machine's drifting load
// falls on all of them alike. The CNI share of an arm is what its pod takes more than
// the host network pod of the same round (the median of those differences). It prints the figures as JSON on stdout for cnibench, progress on
// stderr.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/internal/benchout"
)

type figure = benchout.Figure

func main() {
	cni := flag.String("cni", "bin/cni", "the cni binary")
	ref := flag.String("ref", "", "a directory of reference plugins (loopback, bridge, host-local, portmap, bandwidth)")
	pause := flag.String("pause", "bin/pause", "the pause binary (tools/cmd/pause, static)")
	n := flag.Int("n", 30, "pods per arm")
	crio := flag.String("crio", "", "run CRI-O instead of containerd: the directory of make's crio, pinns, crio-load and crio-runc")
	flag.Parse()
	rt := runtimeOf(*crio)
	benchout.Main("cri-bench", func() ([]figure, error) { return run(rt, *cni, *ref, *pause, *n) })
}

// nodeRuntime is the CRI runtime every arm's node runs, and the list it takes.
type nodeRuntime struct {
	name string
	// crio is set for CRI-O.
	crio *crinode.CRIO
	// list is the standard chain at the cniVersion the runtime wants: containerd 1.6
	// refuses 1.1.0; CRI-O passes GC and STATUS only from 1.1.0 on.
	list string
}

func runtimeOf(crioDir string) nodeRuntime {
	if crioDir == "" {
		return nodeRuntime{name: "containerd", list: crinode.StandardList}
	}
	return nodeRuntime{name: "CRI-O", list: crinode.StandardList11,
		crio: &crinode.CRIO{Bin: filepath.Join(crioDir, "crio"), Pinns: filepath.Join(crioDir, "pinns"),
			Load: filepath.Join(crioDir, "crio-load"), Runc: filepath.Join(crioDir, "crio-runc")}}
}

// arm is one way of running pods, on a node of its own.
type arm struct {
	label    string
	node     *crinode.Node
	hostNet  bool
	up, down []time.Duration
}

func run(rt nodeRuntime, cni, ref, pause string, n int) ([]figure, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("must run as root: it runs %s in namespaces of its own", rt.name)
	}
	dir, err := os.MkdirTemp("", "cri-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	arms, err := startArms(rt, dir, cni, ref, pause)
	for _, a := range arms {
		defer a.node.Close()
	}
	if err != nil {
		return nil, err
	}
	// Two rounds unrecorded: the first pod makes the bridge and the firewall chains.
	if err := measure(rt, arms, 2); err != nil {
		return nil, err
	}
	for _, a := range arms {
		a.up, a.down = nil, nil
	}
	if err := measure(rt, arms, n); err != nil {
		return nil, err
	}
	return figures(arms), nil
}

// startArms starts the nodes: host network first, the reference's if ref is set.
func startArms(rt nodeRuntime, dir, cni, ref, pause string) ([]*arm, error) {
	abs, err := filepath.Abs(pause)
	if err != nil {
		return nil, err
	}
	archive, err := crinode.PackPause(abs, dir)
	if err != nil {
		return nil, err
	}
	type spec struct {
		label   string
		hostNet bool
		install func(d string) (string, []byte, error)
	}
	ours := func(flag string) func(string) (string, []byte, error) {
		return func(d string) (string, []byte, error) { return crinode.Install(cni, d, flag, rt.list) }
	}
	specs := []spec{{label: "host network (no CNI)", hostNet: true, install: ours("--one-exec")}}
	if ref != "" {
		specs = append(specs, spec{label: "reference, 4 plugins", install: func(d string) (string, []byte, error) {
			bin, err := crinode.InstallReference(ref, d)
			return bin, []byte(rt.list), err
		}})
	}
	specs = append(specs, spec{label: "ours, 4 plugins", install: ours("--conf")},
		spec{label: "ours, chain plugin", install: ours("--one-exec")})
	var arms []*arm
	for i, s := range specs {
		d := filepath.Join(dir, fmt.Sprint(i))
		bin, conf, err := s.install(d)
		if err != nil {
			return arms, fmt.Errorf("%s: %w", s.label, err)
		}
		node, err := crinode.Start(crinode.Options{Dir: filepath.Join(d, "node"), BinDir: bin, ConfList: conf, Pause: abs, PauseArchive: archive, CRIO: rt.crio})
		if err != nil {
			return arms, fmt.Errorf("%s: %w", s.label, err)
		}
		arms = append(arms, &arm{label: s.label, node: node, hostNet: s.hostNet})
		if err := waitNetwork(node); err != nil {
			return arms, fmt.Errorf("%s: %w", s.label, err)
		}
	}
	return arms, nil
}

func waitNetwork(n *crinode.Node) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := n.CRI.NetworkReady()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure runs rounds pods per arm: in each round every arm runs its pod, in
// alternating order, then every arm stops and removes it.
func measure(rt nodeRuntime, arms []*arm, rounds int) error {
	for i := range rounds {
		order := slices.Clone(arms)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		ids := map[*arm]string{}
		for _, a := range order {
			p := crinode.Pod{Name: fmt.Sprintf("bench-%d", i), Namespace: "bench", UID: fmt.Sprintf("uid-%d", i), HostNetwork: a.hostNet}
			start := time.Now()
			id, err := a.node.CRI.RunPod(p)
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", a.label, err, a.node.LogTail())
			}
			a.up = append(a.up, time.Since(start))
			ids[a] = id
		}
		for _, a := range order {
			start := time.Now()
			if err := a.node.CRI.StopPod(ids[a]); err != nil {
				return fmt.Errorf("%s: %w", a.label, err)
			}
			if err := a.node.CRI.RemovePod(ids[a]); err != nil {
				return fmt.Errorf("%s: %w", a.label, err)
			}
			a.down = append(a.down, time.Since(start))
		}
		fmt.Fprintf(os.Stderr, "\r  %s: round %d/%d", rt.name, i+1, rounds)
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

func median(ds []time.Duration) float64 { return benchout.Ms(benchout.Median(ds)) }

// figures are the medians of every arm, each arm's CNI share and the ratios of ours to
// the reference's. The share is the median, over the rounds, of the arm's time less the
// host network pod's of the same round: the pods of one round run moments apart, so the
// machine's drifting load cancels out, which it does not between two medians.
func figures(arms []*arm) []figure {
	var out []figure
	phases := []struct {
		name   string
		times  func(*arm) []time.Duration
		target string
	}{
		{"RunPodSandbox", func(a *arm) []time.Duration { return a.up }, "<= 0.35x the reference (one chain plugin)"},
		{"Stop+Remove", func(a *arm) []time.Duration { return a.down }, "<= 0.5x the reference (one chain plugin)"},
	}
	for _, ph := range phases {
		host := ph.times(arms[0])
		share := map[string]float64{}
		for _, a := range arms {
			out = append(out, figure{Name: ph.name + ", " + a.label, Value: median(ph.times(a)), Unit: "ms", Note: "median"})
			if !a.hostNet {
				share[a.label] = median(less(ph.times(a), host))
				out = append(out, figure{Name: "  CNI share of " + ph.name + ", " + a.label, Value: share[a.label], Unit: "ms",
					Note: "median of (pod - host network pod) per round"})
			}
		}
		ref, ok := share["reference, 4 plugins"]
		if !ok || ref <= 0 {
			continue
		}
		for _, label := range []string{"ours, 4 plugins", "ours, chain plugin"} {
			f := figure{Name: "  CNI share of " + ph.name + ", " + label + " / ref", Value: share[label] / ref, Unit: "x"}
			if label == "ours, chain plugin" {
				f.Target = ph.target
			}
			out = append(out, f)
		}
	}
	return out
}

// less is a[i] - b[i] for every round both measured.
func less(a, b []time.Duration) []time.Duration {
	out := make([]time.Duration, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] - b[i]
	}
	return out
}
