// Command cluster-bench is make bench's cluster section: a lab of three nodes (package
// cluster: etcd, flanneld, containerd, each node laid out as kubeadm leaves one) per
// arm, and, taking turns round by round, pods started on all three nodes at once
// through the CRI, as the kubelets of a cluster start a Deployment's replicas, then
// stopped and removed. The arms: ours as the flannel profile's DaemonSet installs it,
// another build of ours (-base) the same way, and the reference plugins as flannel's
// own manifest installs them (-ref, whose directory must hold a flannel plugin). Each
// round also starts host-network pods on the first arm's nodes: what a pod costs the
// CRI without any CNI, so that each arm's CNI share is its pod's time less that. It
// prints the figures as JSON on stdout for cnibench, progress on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cnikit/cni/tools/cluster"
	"github.com/cnikit/cni/tools/crinode"
	"github.com/cnikit/cni/tools/internal/benchout"
)

type figure = benchout.Figure

type options struct {
	cni, base, ref, flanneld, pause, profile string
	rounds, perNode                          int
}

func main() {
	var o options
	flag.StringVar(&o.cni, "cni", "bin/cni", "the cni binary")
	flag.StringVar(&o.base, "base", "", "another build of cni, measured the same way")
	flag.StringVar(&o.ref, "ref", "", "a directory of reference plugins, flannel among them")
	flag.StringVar(&o.flanneld, "flanneld", "bin/flanneld", "flanneld (make bin/flanneld)")
	flag.StringVar(&o.pause, "pause", "bin/pause", "the pause binary (tools/cmd/pause, static)")
	flag.StringVar(&o.profile, "profile", "deploy/kubernetes/cni-flannel.yaml", "the DaemonSet that installs ours")
	flag.IntVar(&o.rounds, "n", 10, "rounds")
	flag.IntVar(&o.perNode, "pods", 3, "pods per node per round")
	flag.Parse()
	benchout.Main("cluster-bench", func() ([]figure, error) { return run(o) })
}

// arm is one way of networking pods, on a lab of its own.
type arm struct {
	label string
	lab   *cluster.Lab
	// up and down are each round's wall time to start and to remove its pods on every
	// node; pod is every pod's own RunPodSandbox.
	up, down, pod []time.Duration
	// hostNet are the host-network pods' RunPodSandbox times of each round, on this
	// arm's nodes (the first arm only).
	hostNet []time.Duration
}

func run(o options) ([]figure, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("must run as root: it runs etcd, flanneld and containerd in namespaces of its own")
	}
	dir, err := os.MkdirTemp("", "cluster-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	arms, err := startArms(dir, o)
	for _, a := range arms {
		defer a.lab.Close()
	}
	if err != nil {
		return nil, err
	}
	// One round unrecorded: the first pods make the bridges and the firewall chains.
	if err := measure(arms, o.perNode, 1); err != nil {
		return nil, err
	}
	for _, a := range arms {
		a.up, a.down, a.pod, a.hostNet = nil, nil, nil, nil
	}
	if err := measure(arms, o.perNode, o.rounds); err != nil {
		return nil, err
	}
	return figures(arms, o.perNode), nil
}

// startArms starts a lab per arm and installs its plugins.
func startArms(dir string, o options) ([]*arm, error) {
	pause, err := filepath.Abs(o.pause)
	if err != nil {
		return nil, err
	}
	archive, err := crinode.PackPause(pause, dir)
	if err != nil {
		return nil, err
	}
	type spec struct {
		label   string
		install func(*cluster.Node) error
		// kubeadm lays the nodes out as kubeadm leaves them first (with -ref's plugins).
		kubeadm bool
	}
	ours := func(bin string) func(*cluster.Node) error {
		return func(n *cluster.Node) error {
			if _, err := n.RunInstallStep(o.profile, bin); err != nil {
				return err
			}
			return waitNetwork(n, "chain")
		}
	}
	specs := []spec{{"ours", ours(o.cni), true}}
	if o.base != "" {
		// On empty nodes: a build from before issue 34 refuses a kubeadm node's plugins.
		specs = append(specs, spec{"base", ours(o.base), false})
	}
	if o.ref != "" {
		flannel := filepath.Join(o.ref, "flannel")
		if _, err := os.Stat(flannel); err != nil {
			return nil, fmt.Errorf("-ref: the reference arm needs a flannel plugin (make reference builds one): %w", err)
		}
		specs = append(specs, spec{"reference", func(n *cluster.Node) error {
			if err := n.InstallReferenceFlannel(flannel); err != nil {
				return err
			}
			return waitNetwork(n, "flannel")
		}, true})
	}
	var arms []*arm
	for i, s := range specs {
		var prepare func(*cluster.Node) error
		if s.kubeadm && o.ref != "" {
			prepare = cluster.KubeadmNode(o.ref)
		}
		lab, err := cluster.Start(cluster.Options{Dir: filepath.Join(dir, fmt.Sprint(i)), Nodes: 3, Flanneld: o.flanneld,
			Pause: pause, PauseArchive: archive, Prepare: prepare})
		if err != nil {
			return arms, fmt.Errorf("%s: %w", s.label, err)
		}
		arms = append(arms, &arm{label: s.label, lab: lab})
		for _, n := range lab.Nodes {
			if err := s.install(n); err != nil {
				return arms, fmt.Errorf("%s: %s: %w", s.label, n.Name, err)
			}
		}
	}
	return arms, nil
}

// waitNetwork waits for the node's CRI to load cbr0 with firstType first.
func waitNetwork(n *cluster.Node, firstType string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		nets, err := n.CRI.Networks()
		if err == nil && slices.ContainsFunc(nets, func(net crinode.Network) bool {
			return net.Name == "cbr0" && len(net.Types) > 0 && net.Types[0] == firstType
		}) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the CRI did not load cbr0 of %s: %v %+v", firstType, err, nets)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// measure runs the rounds: in each, every arm in turn (the order alternating) starts
// perNode pods on each of its nodes at once, then removes them; then the first arm's
// nodes start and remove host-network pods the same way.
func measure(arms []*arm, perNode, rounds int) error {
	for r := range rounds {
		order := slices.Clone(arms)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, a := range order {
			if err := a.round(r, perNode, false); err != nil {
				return err
			}
		}
		if err := arms[0].round(r, perNode, true); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "\r  cluster: round %d/%d", r+1, rounds)
	}
	fmt.Fprintln(os.Stderr)
	return nil
}

// round starts perNode pods on every node of a's lab at once and removes them,
// recording the times.
func (a *arm) round(r, perNode int, hostNet bool) error {
	nodes := a.lab.Nodes
	ids := make([][]string, len(nodes))
	took := make([][]time.Duration, len(nodes))
	for j := range nodes {
		ids[j], took[j] = make([]string, perNode), make([]time.Duration, perNode)
	}
	up, err := each(len(nodes), perNode, func(j, i int) error {
		name := fmt.Sprintf("bench-%d-%d", r, i)
		p := crinode.Pod{Name: name, Namespace: "bench", UID: "uid-" + name, HostNetwork: hostNet}
		if !hostNet {
			p.Ports = []crinode.Port{{HostPort: int32(30000 + i), ContainerPort: 80}}
		}
		start := time.Now()
		id, err := nodes[j].CRI.RunPod(p)
		took[j][i] = time.Since(start)
		ids[j][i] = id
		return err
	})
	down, derr := each(len(nodes), perNode, func(j, i int) error {
		if ids[j][i] == "" {
			return nil
		}
		if err := nodes[j].CRI.StopPod(ids[j][i]); err != nil {
			return err
		}
		return nodes[j].CRI.RemovePod(ids[j][i])
	})
	if err := errors.Join(err, derr); err != nil {
		return fmt.Errorf("%s: %w", a.label, err)
	}
	var times []time.Duration
	for j := range nodes {
		times = append(times, took[j]...)
	}
	if hostNet {
		a.hostNet = append(a.hostNet, times...)
		return nil
	}
	a.up, a.down, a.pod = append(a.up, up), append(a.down, down), append(a.pod, times...)
	return nil
}

// each runs fn for every pod i of every node j at once, as the nodes' kubelets do, and
// returns how long they all took.
func each(nodes, perNode int, fn func(j, i int) error) (time.Duration, error) {
	start := time.Now()
	errs := make([]error, nodes*perNode)
	var wg sync.WaitGroup
	for j := range nodes {
		for i := range perNode {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(j, i); err != nil {
					errs[j*perNode+i] = fmt.Errorf("node%d: %w", j+1, err)
				}
			}()
		}
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// figures are, per arm: pods per second started and removed across the three nodes
// (the median round), the median pod's RunPodSandbox and its CNI share (that less the
// median host-network pod's of the same rounds); and ours over the others.
func figures(arms []*arm, perNode int) []figure {
	pods := float64(3 * perNode)
	hostNet := benchout.Median(arms[0].hostNet)
	var out []figure
	out = append(out, figure{Name: "RunPodSandbox, host network (no CNI)", Value: benchout.Ms(hostNet), Unit: "ms", Note: "median pod"})
	share := map[string]float64{}
	rate := map[string]float64{}
	for _, a := range arms {
		rate[a.label] = pods / benchout.Median(a.up).Seconds()
		share[a.label] = benchout.Ms(benchout.Median(a.pod) - hostNet)
		out = append(out,
			figure{Name: "pods started across 3 nodes, " + a.label, Value: rate[a.label], Unit: "pods/s",
				Note: fmt.Sprintf("%d at once per node, median round", perNode)},
			figure{Name: "pods removed across 3 nodes, " + a.label, Value: pods / benchout.Median(a.down).Seconds(), Unit: "pods/s",
				Note: "Stop+Remove, median round"},
			figure{Name: "  RunPodSandbox, " + a.label, Value: benchout.Ms(benchout.Median(a.pod)), Unit: "ms", Note: "median pod"},
			figure{Name: "  CNI share of RunPodSandbox, " + a.label, Value: share[a.label], Unit: "ms",
				Note: "median pod less the median host-network pod"})
	}
	for _, other := range []string{"base", "reference"} {
		if _, ok := share[other]; !ok || share[other] <= 0 {
			continue
		}
		f := figure{Name: "  CNI share of RunPodSandbox, ours / " + other, Value: share["ours"] / share[other], Unit: "x"}
		if other == "reference" {
			f.Target = "<= 0.5x the reference"
		}
		out = append(out, f,
			figure{Name: "  pods started per second, ours / " + other, Value: rate["ours"] / rate[other], Unit: "x"})
	}
	return out
}
