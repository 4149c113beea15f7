package logreport

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/cnikit/cni/internal/obs/invlog"
)

// OTLP/JSON (opentelemetry-proto, ExportTraceServiceRequest): ids are hex strings,
// times decimal strings of Unix nanoseconds, enums numbers.
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpAttribute `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID      string          `json:"traceId"`
		SpanID       string          `json:"spanId"`
		ParentSpanID string          `json:"parentSpanId,omitempty"`
		Name         string          `json:"name"`
		Kind         int             `json:"kind"`
		Start        string          `json:"startTimeUnixNano"`
		End          string          `json:"endTimeUnixNano"`
		Attributes   []otlpAttribute `json:"attributes,omitempty"`
		Status       otlpStatus      `json:"status"`
	}
	otlpAttribute struct {
		Key   string    `json:"key"`
		Value otlpValue `json:"value"`
	}
	otlpValue struct {
		String *string `json:"stringValue,omitempty"`
		Int    *string `json:"intValue,omitempty"`
	}
	otlpStatus struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	}
)

// The OTLP enums used.
const (
	spanKindInternal = 1
	statusError      = 2
)

// OTLP returns the spans of one log entry as one OTLP/JSON ExportTraceServiceRequest:
// the invocation's span ("bridge ADD") and a child span per step. An entry without a
// trace id has no spans (ok false). One request per line is the format of the
// collector's otlpjsonfile receiver, and each can be POSTed to /v1/traces as it is.
func OTLP(e *invlog.Entry) (_ []byte, ok bool) {
	if e.TraceID == "" || e.SpanID == "" {
		return nil, false
	}
	end := e.Time.Add(msDuration(e.DurationMs))
	attrs := []otlpAttribute{
		str("cni.plugin", e.Plugin), str("cni.command", e.Command), str("cni.network", e.Network),
		str("cni.container_id", e.ContainerID), str("cni.ifname", e.IfName), str("cni.netns", e.Netns),
		str("cni.version", e.CNIVersion),
	}
	for _, k := range [][2]string{{"k8s.pod.name", "K8S_POD_NAME"}, {"k8s.namespace.name", "K8S_POD_NAMESPACE"}} {
		if v := e.CNIArgs[k[1]]; v != "" {
			attrs = append(attrs, str(k[0], v))
		}
	}
	main := otlpSpan{
		TraceID: e.TraceID, SpanID: e.SpanID, ParentSpanID: e.ParentSpanID, Name: e.Plugin + " " + e.Command,
		Kind: spanKindInternal, Start: nanos(e.Time), End: nanos(end), Attributes: attrs,
	}
	if e.Error != nil {
		main.Status = otlpStatus{Code: statusError, Message: e.Error.Msg}
		main.Attributes = append(main.Attributes, integer("cni.error.code", int64(e.Error.Code)))
	}
	spans := []otlpSpan{main}
	for _, s := range e.Steps {
		if s.SpanID == "" {
			continue
		}
		start := e.Time.Add(msDuration(s.StartMs))
		sp := otlpSpan{
			TraceID: e.TraceID, SpanID: s.SpanID, ParentSpanID: e.SpanID, Name: s.Name, Kind: spanKindInternal,
			Start: nanos(start), End: nanos(start.Add(msDuration(s.DurationMs))),
		}
		if s.Error != "" {
			sp.Status = otlpStatus{Code: statusError, Message: s.Error}
		}
		spans = append(spans, sp)
	}
	req := otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource: otlpResource{Attributes: []otlpAttribute{str("service.name", "cni"), str("service.version", e.Version)}},
		ScopeSpans: []otlpScopeSpans{{
			Scope: otlpScope{Name: "github.com/cnikit/cni", Version: e.Version},
			Spans: spans,
		}},
	}}}
	b, err := json.Marshal(req)
	return b, err == nil
}

func str(k, v string) otlpAttribute { return otlpAttribute{Key: k, Value: otlpValue{String: &v}} }

func integer(k string, v int64) otlpAttribute {
	s := strconv.FormatInt(v, 10)
	return otlpAttribute{Key: k, Value: otlpValue{Int: &s}}
}

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// msDuration is a line's milliseconds as a Duration, rounded: 16.569 ms is
// 16568999.99... ns as a float, which truncation made 0.016568999 s.
func msDuration(ms float64) time.Duration {
	return time.Duration(math.Round(ms * float64(time.Millisecond)))
}
