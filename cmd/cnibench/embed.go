package main

import "fmt"

// embed measures pkg/inproc as the runtimes that embed it call it: libcni with
// inproc.Exec plugged in, beside our in-process runner, libcni exec'ing our binary and
// the reference's (four execs): the standard chain's ADD, CHECK and DEL with 10 pods
// resident, then 32 parallel streams of pods (issue 38).
func (b *bench) embed() error {
	embed, inProc := arrangement{build: b.ours(), embed: true}, arrangement{build: b.ours(), inProcess: true}
	ref := arrangement{build: build{label: labelRef, ref: b.ref}}
	arrs := []arrangement{embed, inProc}
	for _, bd := range b.allBuilds("embed", chainPlugins...) {
		arrs = append(arrs, arrangement{build: bd})
	}
	arms, err := b.measureAt(arrs, 10, b.iterations(30))
	defer closeArms(arms)
	if err != nil {
		return err
	}
	b.recordArms("embed", arms, false)
	for _, op := range chainOps {
		ours, ok1 := medianOf(arms, embed, op)
		runner, ok2 := medianOf(arms, inProc, op)
		if ok1 && ok2 && runner > 0 {
			b.record("embed", fmt.Sprintf("%-5s libcni with inproc.Exec / in-process runner @10", op), ours/runner, "ratio", "same moments")
			if op == "ADD" {
				b.target("≤ 1.2 (issue 38)")
			}
		}
		theirs, ok3 := medianOf(arms, ref, op)
		if ok1 && ok3 && theirs > 0 {
			b.record("embed", fmt.Sprintf("%-5s libcni with inproc.Exec / reference four execs @10", op), ours/theirs, "ratio", "same moments")
			if op == "ADD" {
				b.target("≤ 0.12 (issue 38)")
			}
		}
	}
	return b.embedParallel(embed, ref)
}

// embedParallel runs 32 streams of pods through libcni with inproc.Exec and, with -ref,
// through libcni exec'ing the reference, taking turns over two rounds as the parallel
// section does.
func (b *bench) embedParallel(embed, ref arrangement) error {
	const streams = 32
	arrs := []arrangement{embed}
	if b.ref != "" && ref.build.has(chainPlugins...) {
		arrs = append(arrs, ref)
	}
	runs, err := b.parallelRounds(arrs, streams)
	if err != nil {
		return err
	}
	for _, arr := range arrs {
		b.recordFor(arr.build, "embed", fmt.Sprintf("32 streams, %s, pods/s", arr.describe()), runs[arr].rate(), "pods/s", fmt.Sprintf("%d pods", runs[arr].pods))
	}
	if ours, theirs := runs[embed], runs[ref]; ours != nil && theirs != nil {
		b.record("embed", "32 streams, pods/s libcni with inproc.Exec / reference four execs", ours.rate()/theirs.rate(), "ratio", "")
		b.target("≥ 5 (issue 38)")
	}
	return nil
}
