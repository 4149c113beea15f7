package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/cnikit/cni/internal/core/timing"
)

// parallel runs 1, 8 and 32 concurrent streams of pods through libcni, each stream
// attaching a pod and detaching it again, as kubelet sets pods up and tears them down
// in parallel: pods/s and per-operation p50/p99 for ours (four execs, one chain exec),
// -base and the reference. No address may be held by two live pods, and the host must
// be left as a single pod's ADD+DEL left it. Arrangements run one after the other (they
// would only measure each other's load side by side), in rotating order over two rounds.
func (b *bench) parallel() error {
	var arrs []arrangement
	for _, bd := range b.allBuilds("parallel", chainPlugins...) {
		arrs = append(arrs, arrangement{build: bd})
		if bd.label == labelOurs {
			arrs = append(arrs, arrangement{build: bd, oneChain: true})
		}
	}
	for _, streams := range []int{1, 8, 32} {
		runs, err := b.parallelRounds(arrs, streams)
		if err != nil {
			return err
		}
		for _, arr := range arrs {
			run := runs[arr]
			name := fmt.Sprintf("%2d streams, %s", streams, arr.describe())
			note := fmt.Sprintf("%d pods", run.pods)
			b.recordFor(arr.build, "parallel", name+", pods/s", float64(run.pods)/run.elapsed.Seconds(), "pods/s", note)
			for _, op := range []string{"ADD", "DEL"} {
				b.recordFor(arr.build, "parallel", fmt.Sprintf("%s, %s p50", name, op), timing.MedianMs(run.times[op]), "ms", note)
				b.recordFor(arr.build, "parallel", fmt.Sprintf("%s, %s p99", name, op), timing.Ms(timing.Quantile(run.times[op], 0.99)), "ms", note)
			}
			if arr.build.label == labelOurs && streams == 32 {
				p99, p50 := timing.Quantile(run.times["ADD"], 0.99), timing.Median(run.times["ADD"])
				b.record("parallel", fmt.Sprintf("32 streams, %s: ADD p99 / p50", arr.describe()), float64(p99)/float64(p50), "ratio", "")
				b.target("≤ 3 (issue 29)")
			}
		}
		if streams == 32 && b.ref != "" {
			ref := runs[arrangement{build: build{label: labelRef, ref: b.ref}}]
			for _, arr := range arrs[:2] {
				if ours := runs[arr]; ours != nil && ref != nil {
					b.record("parallel", fmt.Sprintf("32 streams, %s: pods/s ours / reference", arr.describe()), ours.rate()/ref.rate(), "ratio", "")
					b.target("≥ 2.5 (issue 29)")
				}
			}
		}
	}
	return nil
}

// parallelRun is what one or more runs of one arrangement measured.
type parallelRun struct {
	pods    int
	elapsed time.Duration
	times   map[string][]time.Duration
}

func (r *parallelRun) rate() float64 { return float64(r.pods) / r.elapsed.Seconds() }

func (r *parallelRun) merge(o *parallelRun) *parallelRun {
	if r == nil {
		return o
	}
	for op, d := range o.times {
		r.times[op] = append(r.times[op], d...)
	}
	r.pods += o.pods
	r.elapsed += o.elapsed
	return r
}

// liveAddrs tracks the addresses of the pods attached right now.
type liveAddrs struct {
	mu   sync.Mutex
	held map[netip.Addr]string
	dups []string
}

func (l *liveAddrs) take(a netip.Addr, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, ok := l.held[a]; ok {
		l.dups = append(l.dups, fmt.Sprintf("%s given to %s while %s held it", a, id, other))
	}
	l.held[a] = id
}

func (l *liveAddrs) release(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, a)
}

// runParallel runs streams × perStream pods through a fresh scenario of arr and checks
// that the host is left as one pod's ADD+DEL left it.
func (b *bench) runParallel(arr arrangement, streams, perStream int) (*parallelRun, error) {
	s, err := b.newScenario(arr)
	if err != nil {
		return nil, err
	}
	defer s.close()
	warm, err := newPods("warm", 0, 1)
	if err != nil {
		return nil, err
	}
	defer closePods(warm)
	ctx := context.Background()
	err = s.host.Do(func() error {
		if _, err := s.drv.add(ctx, warm[0]); err != nil {
			return err
		}
		return s.drv.del(ctx, warm[0])
	})
	if err != nil {
		return nil, fmt.Errorf("warm-up pod: %w", err)
	}
	before, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	run := &parallelRun{pods: streams * perStream, times: map[string][]time.Duration{}}
	live := &liveAddrs{held: map[netip.Addr]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	var all [][]pod
	for st := range streams {
		pods, err := newPods(fmt.Sprintf("s%d-", st), 1+st*perStream, perStream)
		if err != nil {
			return nil, err
		}
		defer closePods(pods)
		all = append(all, pods)
	}
	start := time.Now()
	for _, pods := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.host.Do(func() error {
				for _, p := range pods {
					t0 := time.Now()
					a, err := s.drv.add(ctx, p)
					t1 := time.Now()
					if err != nil {
						return fmt.Errorf("ADD %s: %w", p.id, err)
					}
					// The pod holds its address from its ADD to its DEL; host-local frees
					// it only within the DEL, so it is released here, before.
					live.take(a, p.id)
					live.release(a)
					if err := s.drv.del(ctx, p); err != nil {
						return fmt.Errorf("DEL %s: %w", p.id, err)
					}
					t2 := time.Now()
					mu.Lock()
					run.times["ADD"] = append(run.times["ADD"], t1.Sub(t0))
					run.times["DEL"] = append(run.times["DEL"], t2.Sub(t1))
					mu.Unlock()
				}
				return nil
			})
		}()
	}
	wg.Wait()
	run.elapsed = time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if len(live.dups) > 0 {
		return nil, fmt.Errorf("addresses handed out twice: %v", live.dups)
	}
	after, err := s.snapshot()
	if err != nil {
		return nil, err
	}
	if diff := before.diff(after); diff != "" {
		return nil, fmt.Errorf("left behind after the run:\n%s", diff)
	}
	return run, nil
}

// parallelRounds runs streams concurrent streams of pod ADD+DEL for each arrangement,
// the arrangements taking turns in two rounds (one with -quick), and merges each
// arrangement's rounds.
func (b *bench) parallelRounds(arrs []arrangement, streams int) (map[arrangement]*parallelRun, error) {
	rounds := 2
	if b.quick {
		rounds = 1
	}
	perStream := max(b.iterations(160)/streams, 3)
	runs := map[arrangement]*parallelRun{}
	for r := range rounds {
		for _, arr := range rotated(arrs, r) {
			run, err := b.runParallel(arr, streams, perStream)
			if err != nil {
				return nil, fmt.Errorf("%d streams, %s [%s]: %w", streams, arr.describe(), arr.build.label, err)
			}
			runs[arr] = runs[arr].merge(run)
		}
	}
	return runs, nil
}
