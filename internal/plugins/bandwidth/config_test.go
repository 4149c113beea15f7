package bandwidth

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

func parse(t *testing.T, conf string) *Config {
	t.Helper()
	var c Config
	require.NoError(t, json.Unmarshal([]byte(conf), &c))
	return &c
}

func TestStaticLimitsWinCompletelyOverTheCapability(t *testing.T) {
	tests := []struct {
		name string
		conf string
		want Shaping
	}{
		{"runtime only", `{"runtimeConfig":{"bandwidth":{"ingressRate":8000,"ingressBurst":800,"egressRate":16000,"egressBurst":1600}}}`,
			Shaping{Ingress: Direction{8000, 800}, Egress: Direction{16000, 1600}}},
		{"static only", `{"egressRate":8000,"egressBurst":800}`,
			Shaping{Egress: Direction{8000, 800}}},
		{"one static key hides every runtime key", `{"ingressRate":8000,"ingressBurst":800,
			"runtimeConfig":{"bandwidth":{"egressRate":16000,"egressBurst":1600}}}`,
			Shaping{Ingress: Direction{8000, 800}}},
		{"a static zero still wins", `{"ingressRate":0,"runtimeConfig":{"bandwidth":{"egressRate":16000,"egressBurst":1600}}}`,
			Shaping{}},
		{"nothing", `{}`, Shaping{}},
		{"empty runtime entry", `{"runtimeConfig":{"bandwidth":{}}}`, Shaping{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parse(t, tt.conf).Shaping()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestInvalidLimitsAreRefusedNamingTheField(t *testing.T) {
	tests := []struct {
		name, conf, field string
	}{
		{"rate without burst", `{"ingressRate":8000}`, "ingressBurst"},
		{"burst without rate", `{"egressBurst":8000}`, "egressRate"},
		{"rate below a byte", `{"egressRate":7,"egressBurst":8000}`, "egressRate"},
		{"burst below a byte", `{"ingressRate":8000,"ingressBurst":7}`, "ingressBurst"},
		{"burst of 4 GiB", `{"ingressRate":8000000000,"ingressBurst":34359738360}`, "ingressBurst"},
		{"burst far too long to drain", `{"egressRate":8,"egressBurst":80000000}`, "egressBurst"},
		{"queue limit beyond 32 bits", `{"egressRate":18000000000000,"egressBurst":8000}`, "egressRate"},
		{"runtime entry is validated too", `{"runtimeConfig":{"bandwidth":{"ingressRate":1000}}}`,
			"runtimeConfig.bandwidth.ingressBurst"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parse(t, tt.conf).Shaping()
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.Regexp(t, "^"+tt.field+":", err.Error())
		})
	}
}

func TestGigabyteBurstAtGigabitIsAccepted(t *testing.T) {
	c := parse(t, `{"ingressRate":1000000000,"ingressBurst":8589934592}`)
	s, _, err := c.Shaping()
	require.NoError(t, err)
	assert.True(t, s.Ingress.Enabled())
}

func TestTBFParametersFollowTheReferenceFormulas(t *testing.T) {
	p := tbfFor(Direction{Rate: 8_000_000, Burst: 800_000})
	assert.Equal(t, uint64(1_000_000), p.Rate, "bytes per second")
	assert.Equal(t, uint32(1_000_000/40+100_000), p.Limit, "25 ms of rate plus the burst")
	// 100 000 bytes at 1 MB/s drain in 100 ms.
	assert.Equal(t, uint32(100_000*ticksPerUsec()), p.Buffer)
}

func TestIfbNameAndOwnerAliasFitKernelLimits(t *testing.T) {
	name := ifbName("net1", "ctr")
	assert.Regexp(t, `^bwp[0-9a-f]{12}$`, name)
	assert.NotEqual(t, name, ifbName("net2", "ctr"))
	assert.Equal(t, "cni-bandwidth net=net1 id=ctr if=eth1", owner{"net1", "ctr", "eth1"}.alias())
	assert.Equal(t, "cni-bandwidth net=net1 id=ctr", owner{"net1", "ctr", "eth1"}.legacyAlias())

	long := make([]byte, 400)
	for i := range long {
		long[i] = 'a'
	}
	o := owner{string(long), string(long), "averylongifnam"}
	a := o.alias()
	assert.LessOrEqual(t, len(a), maxAlias)
	assert.Contains(t, a, ownerPrefix(string(long)))
	assert.NotEqual(t, ownerPrefix(string(long)), ownerPrefix(string(long[1:])))
	ifName, named := aliasIfName(a)
	assert.True(t, named, "a cut container id keeps the interface")
	assert.Equal(t, o.ifName, ifName)
	assert.LessOrEqual(t, len(o.legacyAlias()), maxAlias)
	_, named = aliasIfName(o.legacyAlias())
	assert.False(t, named, "the older alias names no interface")
}

// runtimeCases are the runtimeConfig.bandwidth values runtimes send for the annotations
// 1M, 15M, 16M and 125M: the rate in bit/s and, whatever the rate, containerd's (1.6,
// 1.7, 2.x) burst of math.MaxUint32 bits or CRI-O's of math.MaxUint32*8-1. clamped says
// whether that burst is beyond what a tbf holds at the rate.
var runtimeCases = []struct {
	runtime string
	rate    uint64
	burst   uint64
	clamped bool
}{
	{"containerd", 1_000_000, math.MaxUint32, true},
	{"containerd", 15_000_000, math.MaxUint32, true},
	{"containerd", 16_000_000, math.MaxUint32, false},
	{"containerd", 125_000_000, math.MaxUint32, false},
	{"CRI-O", 1_000_000, math.MaxUint32*8 - 1, true},
	{"CRI-O", 15_000_000, math.MaxUint32*8 - 1, true},
	{"CRI-O", 16_000_000, math.MaxUint32*8 - 1, true},
	{"CRI-O", 125_000_000, math.MaxUint32*8 - 1, true},
}

// runtimeLimits is runtimeConfig.bandwidth as the runtime sends it for rate in both
// directions.
func runtimeLimits(rate, burst uint64) string {
	return fmt.Sprintf(`"runtimeConfig":{"bandwidth":{"ingressRate":%d,"ingressBurst":%d,"egressRate":%d,"egressBurst":%d}}`,
		rate, burst, rate, burst)
}

func TestRuntimeBurstsAreClampedToWhatTheKernelHolds(t *testing.T) {
	for _, tt := range runtimeCases {
		t.Run(fmt.Sprintf("%s %d bit/s", tt.runtime, tt.rate), func(t *testing.T) {
			s, clamps, err := parse(t, "{"+runtimeLimits(tt.rate, tt.burst)+"}").Shaping()
			require.NoError(t, err, "a runtime's default burst is never refused")
			for _, d := range []Direction{s.Ingress, s.Egress} {
				assert.Equal(t, tt.rate, d.Rate, "shaped at the requested rate")
				require.NoError(t, validate(d, ""), "the burst fits the kernel")
				if !tt.clamped {
					assert.Equal(t, tt.burst, d.Burst, "a burst that fits is kept")
					continue
				}
				assert.Less(t, d.Burst, tt.burst)
				// The clamp keeps as much burst as the kernel holds: 1 % more would not fit.
				assert.Error(t, validate(Direction{Rate: d.Rate, Burst: d.Burst + d.Burst/100}, ""))
			}
			if !tt.clamped {
				assert.Empty(t, clamps)
				return
			}
			require.Len(t, clamps, 2, "both directions are reported")
			assert.Equal(t, "runtimeConfig.bandwidth.ingressBurst", clamps[0].Field)
			assert.Equal(t, "runtimeConfig.bandwidth.egressBurst", clamps[1].Field)
			assert.Contains(t, clamps[0].String(), fmt.Sprintf("%d bits clamped to %d bits", tt.burst, s.Ingress.Burst))
		})
	}
}

func TestRuntimeBurstThatFitsIsKeptAsSent(t *testing.T) {
	s, clamps, err := parse(t, "{"+runtimeLimits(1_000_000_000, math.MaxUint32)+"}").Shaping()
	require.NoError(t, err)
	assert.Empty(t, clamps)
	assert.Equal(t, Direction{Rate: 1_000_000_000, Burst: math.MaxUint32}, s.Ingress)
}

func TestStaticBurstBeyondTheKernelIsStillRefused(t *testing.T) {
	// The operator wrote it by hand: a mistake to report, not a runtime default to accept.
	_, _, err := parse(t, `{"ingressRate":1000000,"ingressBurst":4294967295}`).Shaping()
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Regexp(t, "^ingressBurst:", err.Error())
}

func TestMaxBurstAlwaysPassesValidation(t *testing.T) {
	for rate := uint64(8); rate < 1<<44; rate = rate*3 + 7 {
		m := maxBurstBytes(rate / 8)
		if m == 0 {
			continue
		}
		assert.NoError(t, validate(Direction{Rate: rate, Burst: m * 8}, ""), "rate %d", rate)
	}
}
