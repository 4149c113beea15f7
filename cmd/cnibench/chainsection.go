package main

import "fmt"

// chainPerPod measures ADD, CHECK and DEL of the standard chain with 10 pods resident,
// every arrangement a runtime can use side by side: four execs through libcni (every
// build, both backend choices), one chain exec (our builds), our in-process runner;
// with each exec's time per plugin, so that a regression shows in its plugin.
func (b *bench) chainPerPod() error {
	var arrs []arrangement
	for _, bd := range b.allBuilds("chain", chainPlugins...) {
		arrs = append(arrs, arrangement{build: bd}, arrangement{build: bd, backend: "iptables"})
		if !bd.isRef() {
			arrs = append(arrs, arrangement{build: bd, oneChain: true})
		}
	}
	arrs = append(arrs, arrangement{build: b.ours(), inProcess: true}, arrangement{build: b.ours(), inProcess: true, backend: "iptables"})
	arms, err := b.measureAt(arrs, 10, b.iterations(30))
	defer closeArms(arms)
	if err != nil {
		return err
	}
	b.recordArms("chain", arms, true)
	b.chainRatios(arms)
	return nil
}

// chainRatios records the ratios issues 18 and 29 set targets for: ours against the
// reference's four plugins, same moments.
func (b *bench) chainRatios(arms []*arm) {
	ref := arrangement{build: build{label: labelRef, ref: b.ref}}
	inProc := arrangement{build: b.ours(), inProcess: true}
	if m, ok := medianOf(arms, inProc, "DEL"); ok {
		b.record("chain", "DEL in-process runner, default backend @10", m, "ms", "")
		b.target("≤ 30 ms (issue 18)")
	}
	targets := []struct {
		arr  arrangement
		what string
		goal map[string]string
	}{
		{arrangement{build: b.ours()}, "four execs", map[string]string{"ADD": "≤ 0.25 (issue 29)", "CHECK": "≤ 0.30 (issue 29)", "DEL": "≤ 0.30 (issue 29)"}},
		{arrangement{build: b.ours(), oneChain: true}, "one chain exec", map[string]string{"ADD": "≤ 0.15 (issue 18)", "CHECK": "≤ 0.10 (issue 18)", "DEL": "≤ 0.25 (issue 18)"}},
	}
	for _, t := range targets {
		for _, op := range chainOps {
			ours, ok1 := medianOf(arms, t.arr, op)
			theirs, ok2 := medianOf(arms, ref, op)
			if !ok1 || !ok2 || theirs == 0 {
				continue
			}
			b.record("chain", fmt.Sprintf("%-5s ours %s / reference four execs @10", op, t.what), ours/theirs, "ratio", "same moments")
			b.target(t.goal[op])
		}
	}
}
