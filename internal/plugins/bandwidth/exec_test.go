package bandwidth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/timing"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/reftest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// execBandwidth runs plugin (the cni binary as "bandwidth", or the reference's) inside
// host, the way a runtime does.
func execBandwidth(tb testing.TB, host *testns.NS, plugin, cmd, cid, netns string, config []byte) pt.Outcome {
	tb.Helper()
	return pt.Exec(tb, host, pt.Call{Bin: plugin, Command: cmd, ContainerID: cid, Netns: netns, IfName: "eth0",
		Config: config})
}

// TestExecdAddTakesEveryRuntimesDefaultBurst runs ADD as containerd and CRI-O call it for
// the annotations 1M, 15M, 16M and 125M: every pod starts, shaped at the requested rate,
// and a clamped burst is said on stderr. Before the clamp, containerd's 1M and 15M and
// every CRI-O value were refused with code 7.
func TestExecdAddTakesEveryRuntimesDefaultBurst(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	plugin := testns.LinkPlugin(t, "bandwidth")
	host := testns.NewWithLoopback(t)
	for i, tt := range runtimeCases {
		t.Run(fmt.Sprintf("%s %d bit/s", tt.runtime, tt.rate), func(t *testing.T) {
			a := attach(t, host, fmt.Sprintf("ctr-rt%d", i), i+1)
			limits := `"capabilities":{"bandwidth":true},` + runtimeLimits(tt.rate, tt.burst)
			o := execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", limits, a.prev))
			require.NoError(t, o.Err, o.String())
			log := o.Stderr
			got, _, err := tbfOn(t, host, a.hostVeth)
			require.NoError(t, err)
			assert.Equal(t, tt.rate/8, got.Rate, "ingress shaped at the requested rate")
			got, _, err = tbfOn(t, host, ifbName("net1", a.cid))
			require.NoError(t, err)
			assert.Equal(t, tt.rate/8, got.Rate, "egress shaped at the requested rate")
			if tt.clamped {
				assert.Contains(t, log, fmt.Sprintf("runtimeConfig.bandwidth.ingressBurst: %d bits clamped to", tt.burst))
				assert.Contains(t, log, "runtimeConfig.bandwidth.egressBurst")
			} else {
				assert.Empty(t, log)
			}
			o = execBandwidth(t, host, plugin, "CHECK", a.cid, a.cont.Path, conf("net1", limits, a.prev))
			require.NoError(t, o.Err, o.String())
			o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path, conf("net1", limits, ""))
			require.NoError(t, o.Err, o.String())
		})
	}
}

func TestExecdAddAndDel(t *testing.T) {
	t.Parallel()
	plugin := testns.LinkPlugin(t, "bandwidth")
	host, a := newAttached(t, "ctr-exec")

	o := execBandwidth(t, host, plugin, "ADD", a.cid, a.cont.Path, conf("net1", bothLimits, a.prev))
	require.NoError(t, o.Err, o.String())
	var res struct {
		CNIVersion string `json:"cniVersion"`
		Interfaces []struct {
			Name string `json:"name"`
		} `json:"interfaces"`
	}
	require.NoError(t, json.Unmarshal([]byte(o.Stdout), &res), o.Stdout)
	assert.Equal(t, "1.0.0", res.CNIVersion)
	require.Len(t, res.Interfaces, 3)
	name := ifbName("net1", a.cid)
	assert.Equal(t, name, res.Interfaces[2].Name)
	_, err := host.Handle(t).LinkByName(name)
	require.NoError(t, err, "ifb exists after ADD")

	o = execBandwidth(t, host, plugin, "DEL", a.cid, a.cont.Path, conf("net1", bothLimits, ""))
	require.NoError(t, o.Err, o.String())
	assert.Empty(t, o.Stdout)
	assertIfb(t, host, name, false, "ifb gone after DEL")
}

// BenchmarkExecdAddDel measures one exec'd ADD plus DEL with both directions shaped and
// reports the medians.
func BenchmarkExecdAddDel(b *testing.B) {
	testns.RequireRoot(b)
	plugin := testns.LinkPlugin(b, "bandwidth")
	benchAddDel(b, func(host *testns.NS, cmd, cid, netns string, config []byte) error {
		if o := execBandwidth(b, host, plugin, cmd, cid, netns, config); o.Err != nil {
			return errors.New(o.String())
		}
		return nil
	})
}

// BenchmarkInProcessAddDel is BenchmarkExecdAddDel without the process start, to show
// where the time goes (the kernel's link creation and deletion dominate).
func BenchmarkInProcessAddDel(b *testing.B) {
	testns.RequireRoot(b)
	benchAddDel(b, func(host *testns.NS, cmd, cid, netns string, config []byte) error {
		_, err := invoke(b, host, cmd, cid, netns, config)
		return err
	})
}

// benchAddDel times an ADD plus DEL of one attachment through call, over and over, and
// reports the medians of each.
func benchAddDel(b *testing.B, call func(host *testns.NS, cmd, cid, netns string, config []byte) error) {
	host := testns.NewWithLoopback(b)
	a := attach(b, host, "ctr-bench", 1)
	add, del := conf("net1", bothLimits, a.prev), conf("net1", bothLimits, "")
	var adds, dels []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := call(host, "ADD", a.cid, a.cont.Path, add); err != nil {
			b.Fatalf("ADD: %v", err)
		}
		mid := time.Now()
		if err := call(host, "DEL", a.cid, a.cont.Path, del); err != nil {
			b.Fatalf("DEL: %v", err)
		}
		adds, dels = append(adds, mid.Sub(start)), append(dels, time.Since(mid))
	}
	b.ReportMetric(timing.MedianMs(adds), "add-ms")
	b.ReportMetric(timing.MedianMs(dels), "del-ms")
}

// TestReferenceWrapsARuntimesBurstWhereOursKeepsTheKernelsMost: given containerd's burst
// at rates where it does not fit, the reference's tbf buffer wraps around 32 bits, so
// the pod gets whatever burst the remainder is (171.8 s of rate at 1M, 0.07 s at 3906k,
// neither what was asked); ours holds the most the kernel can, about 275 s of rate.
func TestReferenceWrapsARuntimesBurstWhereOursKeepsTheKernelsMost(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	ours := testns.LinkPlugin(t, "bandwidth")
	ref := reftest.Bin(t, "bandwidth")
	host := testns.NewWithLoopback(t)
	maxDrain := math.Floor((math.MaxUint32-1)/ticksPerUsec()) / 1e6
	for i, rate := range []uint64{1_000_000, 3_906_000} {
		limits := `"capabilities":{"bandwidth":true},` + runtimeLimits(rate, math.MaxUint32)
		drain := map[string]float64{}
		for j, impl := range []struct{ name, bin string }{{"ours", ours}, {"reference", ref}} {
			a := attach(t, host, fmt.Sprintf("ctr-wrap%d%d", i, j), 20+2*i+j)
			o := execBandwidth(t, host, impl.bin, "ADD", a.cid, a.cont.Path, conf("net1", limits, a.prev))
			require.NoError(t, o.Err, "%s at %d bit/s: %s", impl.name, rate, o)
			got, _, err := tbfOn(t, host, a.hostVeth)
			require.NoError(t, err)
			assert.Equal(t, rate/8, got.Rate, "%s shapes at the requested rate", impl.name)
			drain[impl.name] = float64(got.Buffer) / ticksPerUsec() / 1e6
			o = execBandwidth(t, host, impl.bin, "DEL", a.cid, a.cont.Path, conf("net1", limits, ""))
			require.NoError(t, o.Err, o.String())
		}
		assert.InDelta(t, maxDrain, drain["ours"], 0.01, "%d bit/s: ours keeps the kernel's most", rate)
		assert.Less(t, drain["reference"], drain["ours"]-100, "%d bit/s: the reference's buffer wrapped", rate)
	}
}

// TestCheckPassesWhatTheReferenceShapedForARuntimesBurst: a pod the reference shaped
// with containerd's burst (its buffer wrapped) before the node moved to ours still
// CHECKs, through the exec'd binary: ADD clamps that burst, so ours would otherwise want
// another buffer and fail every such pod (seen in the cluster lab). A tbf at another
// rate still fails.
func TestCheckPassesWhatTheReferenceShapedForARuntimesBurst(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	ours := testns.LinkPlugin(t, "bandwidth")
	ref := reftest.Bin(t, "bandwidth")
	host := testns.NewWithLoopback(t)
	asked := `"capabilities":{"bandwidth":true},` + runtimeLimits(10_000_000, math.MaxUint32)
	a := attach(t, host, "ctr-refcheck", 40)
	o := execBandwidth(t, host, ref, "ADD", a.cid, a.cont.Path, conf("net1", asked, a.prev))
	require.NoError(t, o.Err, o.String())
	t.Cleanup(func() { execBandwidth(t, host, ref, "DEL", a.cid, a.cont.Path, conf("net1", asked, "")) })

	o = execBandwidth(t, host, ours, "CHECK", a.cid, a.cont.Path, conf("net1", asked, a.prev))
	assert.NoError(t, o.Err, "ours CHECKs the reference's tbf: %s", o)

	other := `"capabilities":{"bandwidth":true},` + runtimeLimits(20_000_000, math.MaxUint32)
	o = execBandwidth(t, host, ours, "CHECK", a.cid, a.cont.Path, conf("net1", other, a.prev))
	assert.ErrorContains(t, o.Err, "root tbf has rate 1250000 B/s", "another rate fails: %s", o)
}
