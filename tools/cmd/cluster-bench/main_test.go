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

// Each arm's share is its median pod less the median host-network pod; ours over the
// reference's carries the target, ours over -base none.
func TestFiguresGiveEachArmsShareOverTheHostNetworkPods(t *testing.T) {
	arms := []*arm{
		{label: "ours", up: ms(300, 200), down: ms(300, 300), pod: ms(110, 120, 130), hostNet: ms(100, 100, 90)},
		{label: "base", up: ms(300, 300), down: ms(300, 300), pod: ms(120, 130, 140)},
		{label: "reference", up: ms(900, 900), down: ms(600, 600), pod: ms(200, 160, 180)},
	}
	got := map[string]figure{}
	for _, f := range figures(arms, 3) {
		got[f.Name] = f
	}
	assert.InDelta(t, 100, got["RunPodSandbox, host network (no CNI)"].Value, 1e-9)
	assert.InDelta(t, 20, got["  CNI share of RunPodSandbox, ours"].Value, 1e-9, "120 - 100")
	assert.InDelta(t, 80, got["  CNI share of RunPodSandbox, reference"].Value, 1e-9, "180 - 100")
	share := got["  CNI share of RunPodSandbox, ours / reference"]
	assert.InDelta(t, 0.25, share.Value, 1e-9)
	assert.Contains(t, share.Target, "0.5x")
	assert.InDelta(t, 9/0.25, got["pods started across 3 nodes, ours"].Value, 1e-9, "9 pods in the median round of 250 ms")
	assert.InDelta(t, 0.25/0.9, 1/got["  pods started per second, ours / reference"].Value, 1e-9)
	assert.Empty(t, got["  CNI share of RunPodSandbox, ours / base"].Target)
}
