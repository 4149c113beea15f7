package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cnikit/cni/internal/timing"
)

// arm is one scenario of the chainplugin section: a host with pods already attached,
// and the pods whose operations are timed.
type arm struct {
	label            string
	inProcess        bool // our runner, no exec, instead of libcni
	backend          string
	oneChain         bool
	present          int
	s                *scenario
	background, pods []pod
	times            map[string][]time.Duration // by operation
}

// chainPlugin measures issue 18's figures: the standard chain written as one chain
// plugin through libcni (one process per operation) at 10 and 300 pods present, our
// in-process runner at 10, and, with -ref, the reference's four plugins through libcni
// at 10. The arms' operations are interleaved (pod i
// of each arm, in alternating order, then pod i+1), so that every ratio compares
// operations a moment apart: on a shared machine whose load drifts over minutes, arms
// measured one after the other compare the load more than the code.
func (b *bench) chainPlugin() error {
	arms := []*arm{{label: "ours, one chain plugin", oneChain: true, present: 10}}
	if !b.quick {
		arms = append(arms, &arm{label: "ours, one chain plugin", oneChain: true, present: 300})
	}
	arms = append(arms, &arm{label: "ours, in-process runner", inProcess: true, present: 10})
	if b.ref != "" {
		arms = append(arms, &arm{label: "reference, four plugins", backend: referenceBackend, present: 10})
	}
	measured := b.iterations(30)
	for _, a := range arms {
		defer a.close()
		if err := a.setUp(b, measured); err != nil {
			return fmt.Errorf("%s @%d: %w", a.label, a.present, err)
		}
	}
	for _, op := range []string{"ADD", "CHECK", "DEL"} {
		for i := range measured {
			order := arms
			if i%2 == 1 {
				order = reversedArms(arms)
			}
			for _, a := range order {
				if err := a.time(op, a.pods[i]); err != nil {
					return fmt.Errorf("%s %s @%d: %w", op, a.label, a.present, err)
				}
			}
		}
	}
	for _, a := range arms {
		if err := a.tearDown(); err != nil {
			return fmt.Errorf("%s @%d: %w", a.label, a.present, err)
		}
	}
	b.recordArms(arms)
	return nil
}

func (a *arm) setUp(b *bench, measured int) error {
	var err error
	if a.s, err = b.newScenario(!a.inProcess, a.backend, a.oneChain); err != nil {
		return err
	}
	if a.background, err = newPods("bg", 0, a.present); err != nil {
		return err
	}
	if a.pods, err = newPods("pod", a.present, measured); err != nil {
		return err
	}
	a.times = map[string][]time.Duration{}
	return a.s.host.Do(func() error {
		for _, p := range a.background {
			if _, err := a.s.drv.add(context.Background(), p.id, p.ns.Path, p.i); err != nil {
				return err
			}
		}
		return nil
	})
}

// time runs one operation of one pod inside the arm's host and notes how long it took.
func (a *arm) time(op string, p pod) error {
	return a.s.host.Do(func() error {
		ctx := context.Background()
		start := time.Now()
		var err error
		switch op {
		case "ADD":
			_, err = a.s.drv.add(ctx, p.id, p.ns.Path, p.i)
		case "CHECK":
			err = a.s.drv.check(ctx, p.id, p.ns.Path, p.i)
		case "DEL":
			err = a.s.drv.del(ctx, p.id, p.ns.Path, p.i)
		}
		a.times[op] = append(a.times[op], time.Since(start))
		return err
	})
}

func (a *arm) tearDown() error {
	return a.s.host.Do(func() error {
		for _, p := range a.background {
			if err := a.s.drv.del(context.Background(), p.id, p.ns.Path, p.i); err != nil {
				return err
			}
		}
		return nil
	})
}

func (a *arm) close() {
	closePods(a.pods)
	closePods(a.background)
	if a.s != nil {
		a.s.close()
	}
}

func reversedArms(arms []*arm) []*arm {
	out := make([]*arm, len(arms))
	for i, a := range arms {
		out[len(arms)-1-i] = a
	}
	return out
}

// recordArms records each arm's medians, then the ratios issue 18 sets targets for.
func (b *bench) recordArms(arms []*arm) {
	median := map[string]float64{} // "<op> <label> @<present>"
	for _, a := range arms {
		for _, op := range []string{"ADD", "CHECK", "DEL"} {
			m := timing.MedianMs(a.times[op])
			median[fmt.Sprintf("%s %s @%d", op, a.label, a.present)] = m
			via := " via libcni"
			if a.inProcess {
				via = ""
			}
			b.record("chainplugin", fmt.Sprintf("%-5s %s%s @%d", op, a.label, via, a.present), m, "ms",
				fmt.Sprintf("%d pods present, interleaved", a.present))
			if a.inProcess && op == "DEL" {
				b.target("≤ 30 ms (issue 18)")
			}
		}
	}
	targets := map[string]string{"ADD": "≤ 0.15", "CHECK": "≤ 0.10", "DEL": "≤ 0.25"}
	for _, op := range []string{"ADD", "CHECK", "DEL"} {
		ours := median[fmt.Sprintf("%s ours, one chain plugin @10", op)]
		if ref, ok := median[fmt.Sprintf("%s reference, four plugins @10", op)]; ok && ref > 0 {
			b.record("chainplugin", fmt.Sprintf("%-5s ours one chain plugin / reference @10", op), ours/ref, "ratio", "same moments")
			b.target(targets[op] + " (issue 18)")
		}
		if at300, ok := median[fmt.Sprintf("%s ours, one chain plugin @300", op)]; ok && ours > 0 {
			b.record("chainplugin", fmt.Sprintf("%-5s ours one chain plugin @300 / @10", op), at300/ours, "ratio", "same moments")
			b.target("≤ 1.2 (issue 18)")
		}
	}
}
