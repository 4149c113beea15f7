package invlog

import (
	"encoding/json"
	"time"

	"github.com/cnikit/cni/internal/core/build"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/steps"
	"github.com/cnikit/cni/internal/core/tracectx"
	"github.com/cnikit/cni/internal/result"
)

// Entry is one line of the log. The keys up to Version are those of issue 25, always
// present but for result/error (one of them) and the trace ids (with a trace only).
// ParentSpanID and each step's startMs and spanID place the spans of a trace for an
// exporter; cniArgs (K8S_POD_NAME and the like, token-like values redacted) lets a pod
// be found; argsKeys and runtimeConfigKeys name what the runtime passed, whose values
// only debug writes.
type Entry struct {
	Time        time.Time `json:"time"`
	Command     string    `json:"command"`
	Plugin      string    `json:"plugin"`
	Network     string    `json:"network"`
	ContainerID string    `json:"containerID"`
	Netns       string    `json:"netns"`
	IfName      string    `json:"ifName"`
	CNIVersion  string    `json:"cniVersion"`
	DurationMs  float64   `json:"durationMs"`
	Steps       []Step    `json:"steps"`
	Result      *Result   `json:"result,omitempty"`
	Error       *Error    `json:"error,omitempty"`
	TraceID     string    `json:"traceID,omitempty"`
	SpanID      string    `json:"spanID,omitempty"`
	Version     string    `json:"version"`

	ParentSpanID      string            `json:"parentSpanID,omitempty"`
	CNIArgs           map[string]string `json:"cniArgs,omitempty"`
	ArgsKeys          []string          `json:"argsKeys,omitempty"`
	RuntimeConfigKeys []string          `json:"runtimeConfigKeys,omitempty"`
	// Warnings are what the invocation warned of on stderr (a config key no plugin
	// reads) without failing.
	Warnings []string `json:"warnings,omitempty"`
	// Debug level only.
	Args          json.RawMessage `json:"args,omitempty"`
	RuntimeConfig json.RawMessage `json:"runtimeConfig,omitempty"`
}

// Step is one entry of "steps".
type Step struct {
	Name       string  `json:"name"`
	DurationMs float64 `json:"durationMs"`
	// StartMs is when the step began, after the entry's time.
	StartMs float64 `json:"startMs"`
	SpanID  string  `json:"spanID,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// Result is what an ADD returned: its interfaces and addresses (and routes at debug).
type Result struct {
	Interfaces []Interface        `json:"interfaces,omitempty"`
	IPs        []IP               `json:"ips,omitempty"`
	Routes     []result.WireRoute `json:"routes,omitempty"` // only dst and gw
}

// Interface is one interface of a result.
type Interface struct {
	Name    string `json:"name"`
	Mac     string `json:"mac,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
}

// IP is one address of a result.
type IP struct {
	Address   string `json:"address"`
	Gateway   string `json:"gateway,omitempty"`
	Interface *int   `json:"interface,omitempty"`
}

// Error is the CNI error an invocation failed with.
type Error struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
}

// Failed reports whether the invocation failed.
func (e *Entry) Failed() bool { return e.Error != nil }

// FailedStep is the last step that failed, or nil: the step where a failure began is
// the innermost, which ends first but begins last among those that failed with it.
func (e *Entry) FailedStep() *Step {
	for i := len(e.Steps) - 1; i >= 0; i-- {
		if e.Steps[i].Error != "" {
			return &e.Steps[i]
		}
	}
	return nil
}

// Invocation is what the spec layer knows of one invocation when it has answered.
type Invocation struct {
	Plugin, Command, Network, ContainerID, Netns, IfName, CNIVersion string
	// CNIArgs is CNI_ARGS as received; Args and RuntimeConfig the config's keys.
	CNIArgs             string
	Args, RuntimeConfig json.RawMessage
	// Steps holds the start, the span and the steps.
	Steps *steps.Recorder
	// Parent is the span the invocation's span is a child of (zero for none).
	Parent tracectx.SpanID
	Result *result.Result
	Err    error
}

// Entry builds the line of inv, which ended at end, at c's level.
func (c *Config) Entry(inv Invocation, end time.Time) Entry {
	start := inv.Steps.Start()
	e := Entry{
		Time: start.UTC(), Command: inv.Command, Plugin: inv.Plugin, Network: inv.Network,
		ContainerID: inv.ContainerID, Netns: inv.Netns, IfName: inv.IfName, CNIVersion: inv.CNIVersion,
		DurationMs: ms(end.Sub(start)), Steps: []Step{}, Version: build.Version,
		CNIArgs: RedactCNIArgs(inv.CNIArgs), ArgsKeys: Keys(inv.Args), RuntimeConfigKeys: Keys(inv.RuntimeConfig),
		Warnings: inv.Steps.Warnings(),
	}
	for _, s := range inv.Steps.Steps() {
		st := Step{Name: s.Name, DurationMs: ms(s.Duration), StartMs: ms(s.Start), Error: s.Err}
		if !s.SpanID.IsZero() {
			st.SpanID = s.SpanID.String()
		}
		e.Steps = append(e.Steps, st)
	}
	if span := inv.Steps.Span(); span.Valid() {
		e.TraceID, e.SpanID = span.TraceID.String(), span.SpanID.String()
		if !inv.Parent.IsZero() {
			e.ParentSpanID = inv.Parent.String()
		}
	}
	if c.Debug() {
		e.Args, e.RuntimeConfig = RedactJSON(inv.Args), RedactJSON(inv.RuntimeConfig)
	}
	if inv.Err != nil {
		ce := cnierror.From(inv.Err)
		e.Error = &Error{Code: ce.Code, Msg: ce.Msg, Details: ce.Details}
	} else if inv.Result != nil {
		e.Result = resultOf(inv.Result, c.Debug())
	}
	return e
}

func resultOf(r *result.Result, routes bool) *Result {
	out := &Result{}
	for _, i := range r.Interfaces {
		out.Interfaces = append(out.Interfaces, Interface{Name: i.Name, Mac: i.Mac, Sandbox: i.Sandbox})
	}
	for _, ip := range r.IPs {
		e := IP{Address: ip.Address.String(), Interface: ip.Interface}
		if ip.Gateway.IsValid() {
			e.Gateway = ip.Gateway.String()
		}
		out.IPs = append(out.IPs, e)
	}
	if routes {
		for _, rt := range r.Routes {
			e := result.WireRoute{Dst: rt.Dst.String()}
			if rt.GW.IsValid() {
				e.GW = rt.GW.String()
			}
			out.Routes = append(out.Routes, e)
		}
	}
	return out
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Write appends the line of inv to c's file.
func (c *Config) Write(inv Invocation) error {
	e := c.Entry(inv, time.Now())
	line, err := e.Line()
	if err != nil {
		return err
	}
	return c.Append(line)
}
