package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func ms(vs ...int) []time.Duration {
	var out []time.Duration
	for _, v := range vs {
		out = append(out, time.Duration(v)*time.Millisecond)
	}
	return out
}

func TestFiguresGiveEachArmsShareOverTheHostNetworkPod(t *testing.T) {
	arms := []*arm{
		{label: "host network (no CNI)", hostNet: true, up: ms(50, 70, 60), down: ms(40, 40, 40)},
		{label: "reference, 4 plugins", up: ms(160, 150, 170), down: ms(140, 150, 130)},
		{label: "ours, 4 plugins", up: ms(100, 110, 90), down: ms(100, 100, 100)},
		{label: "ours, chain plugin", up: ms(90, 80, 85), down: ms(85, 95, 90)},
	}
	got := map[string]figure{}
	for _, f := range figures(arms) {
		got[f.Name] = f
	}
	assert.InDelta(t, 60, got["RunPodSandbox, host network (no CNI)"].Value, 1e-9, "median")
	// Per round: 110, 80, 110 over the host network pod.
	assert.InDelta(t, 110, got["  CNI share of RunPodSandbox, reference, 4 plugins"].Value, 1e-9, "median of 160-50, 150-70, 170-60")
	share := got["  CNI share of RunPodSandbox, ours, chain plugin / ref"]
	assert.InDelta(t, 25.0/110, share.Value, 1e-9, "median of 40, 10, 25 over 110")
	assert.Contains(t, share.Target, "0.35x")
	down := got["  CNI share of Stop+Remove, ours, chain plugin / ref"]
	assert.InDelta(t, 50.0/100, down.Value, 1e-9, "median of 45, 55, 50 over median of 100, 110, 90")
	assert.Contains(t, down.Target, "0.5x")
}

func TestFiguresWithoutTheReferenceHaveNoRatio(t *testing.T) {
	arms := []*arm{
		{label: "host network (no CNI)", hostNet: true, up: ms(50), down: ms(40)},
		{label: "ours, chain plugin", up: ms(80), down: ms(90)},
	}
	for _, f := range figures(arms) {
		assert.NotContains(t, f.Name, "/ ref")
	}
}
