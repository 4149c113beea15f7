package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
)

// arm is one arrangement of the standard chain measured beside others: a host with
// resident pods, and fresh pods whose operations are timed. Arms take turns operation
// by operation (pod i of each arm, in rotating order, then pod i+1), so that every
// ratio compares operations a moment apart: on a shared machine whose load drifts over
// minutes, arms measured one after the other compare the load more than the code.
type arm struct {
	arr      arrangement
	s        *scenario
	resident []pod
	pods     []pod // measured, each used once
	times    map[string][]time.Duration
}

func (b *bench) newArm(a arrangement) (*arm, error) {
	s, err := b.newScenario(a)
	if err != nil {
		return nil, fmt.Errorf("%s [%s]: %w", a.describe(), a.build.label, err)
	}
	return &arm{arr: a, s: s, times: map[string][]time.Duration{}}, nil
}

// armsAt makes an arm per arrangement with present pods resident in each; the caller
// closes them (closeArms), also on error.
func (b *bench) armsAt(arrs []arrangement, present int) ([]*arm, error) {
	var arms []*arm
	for _, arr := range arrs {
		a, err := b.newArm(arr)
		if err != nil {
			return arms, err
		}
		arms = append(arms, a)
		if err := a.grow(present); err != nil {
			return arms, err
		}
		a.reset()
	}
	return arms, nil
}

// measureAt is armsAt, then n operations of each kind per arm, taking turns
// (interleave). The caller closes the arms, also on error.
func (b *bench) measureAt(arrs []arrangement, present, n int) ([]*arm, error) {
	arms, err := b.armsAt(arrs, present)
	if err == nil {
		err = interleave(arms, n)
	}
	return arms, err
}

func closeArms(arms []*arm) {
	for _, a := range arms {
		a.close()
	}
}

func (a *arm) name() string { return a.arr.describe() + " [" + a.arr.build.label + "]" }

// grow adds resident pods up to n, untimed.
func (a *arm) grow(n int) error {
	if n <= len(a.resident) {
		return nil
	}
	more, err := newResidentPods("bg", len(a.resident), n-len(a.resident))
	if err != nil {
		return err
	}
	a.resident = append(a.resident, more...)
	return a.s.host.Do(func() error {
		for _, p := range more {
			if _, err := a.s.drv.add(context.Background(), p); err != nil {
				return fmt.Errorf("%s: resident pod %s: %w", a.name(), p.id, err)
			}
		}
		return nil
	})
}

// fresh makes n more pods to measure, numbered after every resident pod to come and
// so that their host ports (capArgs) are none a resident pod maps.
func (a *arm) fresh(n int) ([]pod, error) {
	pods, err := newPods("pod", 1_020_000+len(a.pods), n)
	if err != nil {
		return nil, err
	}
	a.pods = append(a.pods, pods...)
	return pods, nil
}

// time runs one operation of one pod inside the arm's host, with the plugin clock on.
func (a *arm) time(op string, p pod) error {
	a.s.clock.counting(true)
	defer a.s.clock.counting(false)
	return a.s.host.Do(func() error {
		ctx := context.Background()
		start := time.Now()
		var err error
		switch op {
		case "ADD":
			_, err = a.s.drv.add(ctx, p)
		case "CHECK":
			err = a.s.drv.check(ctx, p)
		case "DEL":
			err = a.s.drv.del(ctx, p)
		}
		a.times[op] = append(a.times[op], time.Since(start))
		if err != nil {
			return fmt.Errorf("%s %s of %s: %w", a.name(), op, p.id, err)
		}
		return nil
	})
}

func (a *arm) close() {
	closePods(a.pods)
	closePods(a.resident)
	if a.s != nil {
		a.s.close()
	}
}

// reset forgets the times (and the plugin clock's) before the next level.
func (a *arm) reset() {
	a.times = map[string][]time.Duration{}
	a.s.clock.mu.Lock()
	a.s.clock.times = map[string][]time.Duration{}
	a.s.clock.mu.Unlock()
}

var chainOps = []string{"ADD", "CHECK", "DEL"}

// interleave gives each arm n fresh pods and runs ADD of pod i in every arm (the order
// rotating), then pod i+1, …; then CHECK, then DEL, the same way.
func interleave(arms []*arm, n int) error {
	fresh := make([][]pod, len(arms))
	for k, a := range arms {
		var err error
		if fresh[k], err = a.fresh(n); err != nil {
			return err
		}
	}
	idx := make([]int, len(arms))
	for k := range idx {
		idx[k] = k
	}
	for _, op := range chainOps {
		for i := range n {
			for _, k := range rotated(idx, i) {
				if err := arms[k].time(op, fresh[k][i]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// recordArms records each arm's medians (and the median of each plugin's exec within
// them) under "<op> <arrangement> @<resident>", the build apart.
func (b *bench) recordArms(section string, arms []*arm, withPlugins bool) {
	for _, a := range arms {
		present := len(a.resident)
		for _, op := range chainOps {
			b.recordFor(a.arr.build, section, fmt.Sprintf("%-5s %s @%d", op, a.arr.describe(), present),
				timing.MedianMs(a.times[op]), "ms", fmt.Sprintf("%d pods", len(a.times[op])))
		}
		if !withPlugins {
			continue
		}
		for _, k := range pluginKeys(a.s.clock.times) {
			b.recordFor(a.arr.build, section, fmt.Sprintf("  %s, %s @%d", k, a.arr.describe(), present),
				timing.MedianMs(a.s.clock.times[k]), "ms", "per plugin")
		}
	}
}

// pluginKeys are the plugin clock's "<plugin> <command>" keys, by command in chain
// order, then by plugin.
func pluginKeys(times map[string][]time.Duration) []string {
	keys := make([]string, 0, len(times))
	for k := range times {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return opOrder(keys[i]) < opOrder(keys[j]) || opOrder(keys[i]) == opOrder(keys[j]) && keys[i] < keys[j]
	})
	return keys
}

// opOrder sorts "<plugin> <command>" keys by command in chain order.
func opOrder(key string) int {
	for i, op := range chainOps {
		if len(key) > len(op) && key[len(key)-len(op):] == op {
			return i
		}
	}
	return len(chainOps)
}

// medianOf finds the arm of an arrangement and returns its median for op.
func medianOf(arms []*arm, want arrangement, op string) (float64, bool) {
	i := slices.IndexFunc(arms, func(a *arm) bool { return a.arr == want })
	if i < 0 || len(arms[i].times[op]) == 0 {
		return 0, false
	}
	return timing.MedianMs(arms[i].times[op]), true
}
