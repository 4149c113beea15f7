package bandwidth

import (
	"cmp"
	"fmt"
	"math"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// latencyUsec is how long a packet may wait in a tbf queue. The reference fixes it at
// 25 ms; the queue limit is derived from it.
const latencyUsec = 25000

// Config is the plugin's part of the network config: the four limits, statically or
// from the "bandwidth" capability.
type Config struct {
	Limits
	RuntimeConfig struct {
		Bandwidth *Limits `json:"bandwidth,omitempty"`
	} `json:"runtimeConfig,omitempty"`
}

// Limits are the four keys as written, rates in bit/s and bursts in bits. Pointers tell
// "absent" from 0: any static key present makes the static entry win completely.
type Limits struct {
	IngressRate  *uint64 `json:"ingressRate,omitempty"`
	IngressBurst *uint64 `json:"ingressBurst,omitempty"`
	EgressRate   *uint64 `json:"egressRate,omitempty"`
	EgressBurst  *uint64 `json:"egressBurst,omitempty"`
}

func (l *Limits) present() bool {
	return l != nil && (l.IngressRate != nil || l.IngressBurst != nil || l.EgressRate != nil || l.EgressBurst != nil)
}

// Direction is one resolved limit: rate in bit/s, burst in bits. Zero means unlimited.
type Direction struct {
	Rate  uint64
	Burst uint64
}

// Enabled reports whether the direction is shaped.
func (d Direction) Enabled() bool { return d.Rate > 0 && d.Burst > 0 }

// Shaping is what the plugin does: Ingress is traffic into the container, Egress out of it.
type Shaping struct {
	Ingress Direction
	Egress  Direction
}

// IsZero reports that nothing is shaped, so the plugin passes prevResult through.
func (s Shaping) IsZero() bool { return !s.Ingress.Enabled() && !s.Egress.Enabled() }

// Shaping resolves and validates the limits: the static entry if any of its keys is
// present, otherwise the runtime one. Only the entry in force is validated. A runtime's
// burst beyond what the kernel's tbf can hold at its rate is clamped to that maximum
// instead of refused: containerd sends 4294967295 bits and CRI-O 34359738359 bits for
// every bandwidth annotation, meaning "no burst limit of note", and a pod must still
// start. Each clamp is returned so the plugin can say so. The operator's static values
// are refused as they were: a nonsense value written by hand is a mistake to report.
func (c *Config) Shaping() (Shaping, []Clamp, error) {
	l, where, runtime := &c.Limits, "", false
	if !l.present() {
		l, where, runtime = c.RuntimeConfig.Bandwidth, "runtimeConfig.bandwidth.", true
	}
	if !l.present() {
		return Shaping{}, nil, nil
	}
	s := Shaping{
		Ingress: Direction{Rate: value(l.IngressRate), Burst: value(l.IngressBurst)},
		Egress:  Direction{Rate: value(l.EgressRate), Burst: value(l.EgressBurst)},
	}
	var clamps []Clamp
	if runtime {
		for _, d := range []struct {
			dir   *Direction
			field string
		}{{&s.Ingress, where + "ingressBurst"}, {&s.Egress, where + "egressBurst"}} {
			if to, ok := clampBurst(*d.dir); ok {
				clamps = append(clamps, Clamp{Field: d.field, From: d.dir.Burst, To: to, Rate: d.dir.Rate})
				d.dir.Burst = to
			}
		}
	}
	if err := cmp.Or(validate(s.Ingress, where+"ingress"), validate(s.Egress, where+"egress")); err != nil {
		return Shaping{}, nil, err
	}
	return s, clamps, nil
}

// Clamp records a runtime burst lowered to the kernel's maximum at its rate.
type Clamp struct {
	Field    string
	From, To uint64 // bits
	Rate     uint64 // bit/s
}

func (c Clamp) String() string {
	return fmt.Sprintf("%s: %d bits clamped to %d bits, the most a tbf holds at %d bit/s", c.Field, c.From, c.To, c.Rate)
}

// maxBurstBytes is the largest burst in bytes that a tbf at rateB bytes/s holds: its
// drain time must fit the kernel's 32-bit tick counter, the queue limit (25 ms of rate
// plus the burst) 32 bits, and the burst itself the reference's 4 GiB rule. Zero when
// the rate alone overflows the queue limit.
func maxBurstBytes(rateB uint64) uint64 {
	byDrain := math.Floor((math.MaxUint32-1)/ticksPerUsec()) * float64(rateB) / 1e6
	byLimit := math.MaxUint32 - 1 - float64(rateB)*latencyUsec/1e6
	m := math.Min(math.Min(byDrain, byLimit), math.MaxUint32-1)
	if m < 1 {
		return 0
	}
	// One byte under the bound: float rounding in tbfFor must not reach it.
	return uint64(m) - 1
}

// clampBurst returns the burst in bits that d's rate allows, and whether d's burst
// exceeded it. A direction the kernel cannot shape at any burst, or with a rate or
// burst missing, is left to validate.
func clampBurst(d Direction) (uint64, bool) {
	if d.Rate < 8 || d.Burst < 8 {
		return 0, false
	}
	m := maxBurstBytes(d.Rate / 8)
	if m < 1 || d.Burst/8 <= m {
		return 0, false
	}
	return m * 8, true
}

func value(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// validate applies the reference's rules (rate and burst together, burst/8 below 4 GiB)
// and refuses the values the reference would turn into a broken qdisc: a rate or burst
// below one byte, a burst that takes longer to drain than the kernel's 32-bit tick
// counter holds, and a queue limit beyond 32 bits.
func validate(d Direction, prefix string) error {
	rate, burst := prefix+"Rate", prefix+"Burst"
	switch {
	case d.Rate == 0 && d.Burst == 0:
		return nil
	case d.Rate == 0:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: must be set when %s is set", rate, burst)
	case d.Burst == 0:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: must be set when %s is set", burst, rate)
	case d.Rate < 8:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: must be at least 8 bit/s, got %d", rate, d.Rate)
	case d.Burst < 8:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: must be at least 8 bits, got %d", burst, d.Burst)
	case d.Burst/8 >= math.MaxUint32:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: must be below 4 GiB (34359738360 bits), got %d", burst, d.Burst)
	}
	rateB, burstB := float64(d.Rate/8), float64(d.Burst/8)
	if drainUsec := burstB * 1e6 / rateB; drainUsec*ticksPerUsec() >= math.MaxUint32 {
		return cnierror.Newf(cnierror.CodeInvalidConfig,
			"%s: %d bits take %.0f s to drain at %s %d bit/s; the kernel's limit is %.0f s",
			burst, d.Burst, drainUsec/1e6, rate, d.Rate, math.MaxUint32/ticksPerUsec()/1e6)
	}
	if rateB*latencyUsec/1e6+burstB >= math.MaxUint32 {
		return cnierror.Newf(cnierror.CodeInvalidConfig,
			"%s: %d bit/s with %s %d gives a queue above 4 GiB", rate, d.Rate, burst, d.Burst)
	}
	return nil
}
