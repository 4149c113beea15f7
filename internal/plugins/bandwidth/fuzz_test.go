package bandwidth

import (
	"math"
	"testing"

	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

func loadForAdd(req *skel.Request) (Shaping, error) {
	s, _, err := load(req)
	if err != nil {
		return Shaping{}, err
	}
	if req.PrevResult == nil {
		return Shaping{}, errNotChained
	}
	return s, nil
}

// FuzzLoad drives bandwidth configs (static limits, runtimeConfig.bandwidth) through
// skel's ADD path and the plugin's validation. A refused config is a config error
// (never 999). An accepted one gives tbf settings the kernel's 32-bit fields hold
// without wrapping (the limit is at least the burst, the buffer is the burst's drain
// time), and written back out it loads to the same shaping.
func FuzzLoad(f *testing.F) {
	prev := `"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"veth1"},{"name":"eth0","sandbox":"/var/run/netns/c"}]}`
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"demo","type":"bandwidth","capabilities":{"bandwidth":true},` +
			`"runtimeConfig":{"bandwidth":{"ingressRate":10000000,"ingressBurst":1000000,"egressRate":10000000,"egressBurst":1000000}},` + prev + `}`,
		`{"cniVersion":"0.3.1","name":"n","type":"bandwidth","ingressRate":123,"ingressBurst":456,"egressRate":8,"egressBurst":8,` +
			`"prevResult":{"cniVersion":"0.3.1","interfaces":[{"name":"veth1"}]}}`,
		`{"cniVersion":"1.0.0","name":"n","type":"bandwidth","ingressRate":0,"runtimeConfig":{"bandwidth":{"egressRate":1,"egressBurst":1}},` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"bandwidth","egressRate":18446744073709551615,"egressBurst":34359738352,` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"bandwidth","ingressRate":9,"ingressBurst":34359738352,` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"bandwidth","ingressRate":-1,"ingressBurst":1.5}`,
		`{"cniVersion":"1.1.0","name":"n","type":"bandwidth","ingressRate":1000}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(""), config, loadForAdd)
		if !ok {
			return
		}
		for _, d := range []Direction{l.Value.Ingress, l.Value.Egress} {
			if d.Enabled() {
				requireTBFFits(t, d)
			}
		}
		conf, err := skel.LoadConfig[Config](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, Plugin(), l, conf, loadForAdd)
	})
}

func requireTBFFits(t *testing.T, d Direction) {
	t.Helper()
	p := tbfFor(d)
	rate, burst := float64(d.Rate/8), float64(d.Burst/8)
	wantLimit := rate*latencyUsec/1e6 + burst
	wantBuffer := burst * 1e6 / rate * ticksPerUsec()
	if p.Rate == 0 || float64(p.Limit) < burst || math.Abs(float64(p.Limit)-wantLimit) > 1 ||
		math.Abs(float64(p.Buffer)-wantBuffer) > ticksPerUsec()+1 {
		t.Fatalf("%+v becomes tbf %s; want limit %.0f, buffer %.0f", d, p, wantLimit, wantBuffer)
	}
}
