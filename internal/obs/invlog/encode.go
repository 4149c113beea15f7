package invlog

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cnikit/cni/internal/result"
)

// Line encodes e as one log line, newline included: byte for byte what json.Marshal
// makes of it (TestLineIsWhatEncodingJSONWrites holds the two equal). It is written by
// hand because encoding/json builds an encoder by reflection for each type the first
// time it meets it, once per process: 0.2 to 0.6 ms in every plugin exec that logs on
// the 2-vCPU test VM, the whole of the 0.3 ms the log may cost. Reading the log back
// (cni log) still decodes with encoding/json.
func (e *Entry) Line() ([]byte, error) {
	b := make([]byte, 0, 1024)
	b = append(b, `{"time":`...)
	if y := e.Time.Year(); y < 0 || y >= 10000 {
		return nil, &json.UnsupportedValueError{Str: "year outside of range [0,9999]"}
	}
	b = e.Time.AppendFormat(append(b, '"'), time.RFC3339Nano)
	b = append(b, '"')
	b = field(b, "command", e.Command)
	b = field(b, "plugin", e.Plugin)
	b = field(b, "network", e.Network)
	b = field(b, "containerID", e.ContainerID)
	b = field(b, "netns", e.Netns)
	b = field(b, "ifName", e.IfName)
	b = field(b, "cniVersion", e.CNIVersion)
	b = appendFloat(append(b, `,"durationMs":`...), e.DurationMs)
	b = append(b, `,"steps":`...)
	b = appendSteps(b, e.Steps)
	if e.Result != nil {
		b = appendResult(append(b, `,"result":`...), e.Result)
	}
	if e.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendUint(b, uint64(e.Error.Code), 10)
		b = field(b, "msg", e.Error.Msg)
		b = optional(b, "details", e.Error.Details)
		b = append(b, '}')
	}
	b = optional(b, "traceID", e.TraceID)
	b = optional(b, "spanID", e.SpanID)
	b = field(b, "version", e.Version)
	b = optional(b, "parentSpanID", e.ParentSpanID)
	if len(e.CNIArgs) > 0 {
		b = appendMap(append(b, `,"cniArgs":`...), e.CNIArgs)
	}
	b = appendArray(b, 0, "argsKeys", e.ArgsKeys, appendString) // the object began at 0
	b = appendArray(b, 0, "runtimeConfigKeys", e.RuntimeConfigKeys, appendString)
	b = appendArray(b, 0, "warnings", e.Warnings, appendString)
	var err error
	if b, err = appendRaw(b, "args", e.Args); err != nil {
		return nil, err
	}
	if b, err = appendRaw(b, "runtimeConfig", e.RuntimeConfig); err != nil {
		return nil, err
	}
	return append(b, '}', '\n'), nil
}

func appendSteps(b []byte, steps []Step) []byte {
	if steps == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"name":`...), s.Name)
		b = appendFloat(append(b, `,"durationMs":`...), s.DurationMs)
		b = appendFloat(append(b, `,"startMs":`...), s.StartMs)
		b = optional(b, "spanID", s.SpanID)
		b = optional(b, "error", s.Error)
		b = append(b, '}')
	}
	return append(b, ']')
}

func appendResult(b []byte, r *Result) []byte {
	b = append(b, '{')
	start := len(b)
	b = appendArray(b, start, "interfaces", r.Interfaces, func(b []byte, f Interface) []byte {
		b = appendString(append(b, `{"name":`...), f.Name)
		b = optional(b, "mac", f.Mac)
		return append(optional(b, "sandbox", f.Sandbox), '}')
	})
	b = appendArray(b, start, "ips", r.IPs, func(b []byte, ip IP) []byte {
		b = appendString(append(b, `{"address":`...), ip.Address)
		b = optional(b, "gateway", ip.Gateway)
		if ip.Interface != nil {
			b = strconv.AppendInt(append(b, `,"interface":`...), int64(*ip.Interface), 10)
		}
		return append(b, '}')
	})
	b = appendArray(b, start, "routes", r.Routes, func(b []byte, rt result.WireRoute) []byte {
		b = appendString(append(b, `{"dst":`...), rt.Dst)
		return append(optional(b, "gw", rt.GW), '}')
	})
	return append(b, '}')
}

// appendArray writes "name":[...] with each element written by elem, after a comma
// unless it is the first member of the object begun at start; an empty list is left
// out (omitempty).
func appendArray[T any](b []byte, start int, name string, list []T, elem func([]byte, T) []byte) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(append(append(comma(b, start), '"'), name...), `":[`...)
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, v)
	}
	return append(b, ']')
}

// comma separates a member from the ones before it in the object begun at start.
func comma(b []byte, start int) []byte {
	if len(b) > start {
		return append(b, ',')
	}
	return b
}

func appendMap(b []byte, m map[string]string) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(appendString(b, k), ':'), m[k])
	}
	return append(b, '}')
}

// appendRaw writes a raw JSON value compacted and HTML-escaped, as json.Marshal does
// with a RawMessage.
func appendRaw(b []byte, name string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return b, nil
	}
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	b = append(append(append(b, `,"`...), name...), `":`...)
	return append(b, escaped.Bytes()...), nil
}

// field writes ,"name":value; optional does so only for a non-empty value (omitempty).
func field(b []byte, name, value string) []byte {
	b = append(append(append(b, `,"`...), name...), `":`...)
	return appendString(b, value)
}

func optional(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return field(b, name, value)
}

// appendFloat formats f as encoding/json does: the shortest representation, in
// exponent form only below 1e-6 or from 1e21 on. NaN and infinities, which JSON lacks,
// are written as 0 (durations are neither).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// "1e-07" becomes "1e-7", as encoding/json writes it.
		if n := len(b) - start; n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does by default: ", \ and control characters
// escaped (\n, \r, \t, \b, \f by their short forms), <, > and & as \u003c and the like,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD. It copies the runs of
// characters kept as they are in one append each.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most of a log line's text is ASCII: tested without decoding, and escaped
		// without a second test.
		if c := s[i]; c < utf8.RuneSelf {
			if !keptASCII(c) {
				b = appendEscape(append(b, s[start:i]...), rune(c))
				start = i + 1
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !keptRune(r, size) {
			b = appendEscape(append(b, s[start:i]...), r)
			start = i + size
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// keptASCII reports whether encoding/json writes the ASCII character c as itself.
func keptASCII(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// keptRune is keptASCII for the other characters, size bytes of a string; an invalid
// byte decodes as utf8.RuneError of size 1.
func keptRune(r rune, size int) bool {
	return r != '\u2028' && r != '\u2029' && (r != utf8.RuneError || size > 1)
}

// appendEscape writes the escape of a character not kept as itself (utf8.RuneError
// standing for an invalid byte, which becomes U+FFFD): a short form where JSON has one,
// else \u and four hex digits.
func appendEscape(b []byte, r rune) []byte {
	if i := strings.IndexRune("\"\\\b\f\n\r\t", r); i >= 0 {
		return append(b, '\\', "\"\\bfnrt"[i])
	}
	return append(b, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
