package bandwidth

import (
	"math"

	"github.com/cnikit/cni/internal/cnierror"
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
// present, otherwise the runtime one. Only the entry in force is validated.
func (c *Config) Shaping() (Shaping, error) {
	l, where := &c.Limits, ""
	if !l.present() {
		l, where = c.RuntimeConfig.Bandwidth, "runtimeConfig.bandwidth."
	}
	if !l.present() {
		return Shaping{}, nil
	}
	s := Shaping{
		Ingress: Direction{Rate: value(l.IngressRate), Burst: value(l.IngressBurst)},
		Egress:  Direction{Rate: value(l.EgressRate), Burst: value(l.EgressBurst)},
	}
	if err := validate(s.Ingress, where+"ingress"); err != nil {
		return Shaping{}, err
	}
	if err := validate(s.Egress, where+"egress"); err != nil {
		return Shaping{}, err
	}
	return s, nil
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
