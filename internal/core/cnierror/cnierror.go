// Package cnierror is the typed CNI error every part of the toolkit returns, carrying
// the spec's well-known codes so that the wire JSON and exit status are decided once,
// where the meaning of a failure is known.
package cnierror

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The spec's well-known error codes (CNI spec v1.1.0, "Error"), plus the library-only
// codes the reference runtime library uses (8, 999).
const (
	CodeIncompatibleVersion uint = 1
	CodeUnsupportedField    uint = 2
	CodeUnknownContainer    uint = 3
	CodeInvalidEnv          uint = 4
	CodeIO                  uint = 5
	CodeDecode              uint = 6
	CodeInvalidConfig       uint = 7
	CodeInvalidNetNS        uint = 8
	CodeTryAgainLater       uint = 11
	CodeNotAvailable        uint = 50
	CodeLimitedConnectivity uint = 51
	CodeInternal            uint = 999
)

// Error is a CNI error as printed on stdout by a failing plugin.
type Error struct {
	CNIVersion string `json:"cniVersion,omitempty"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

// New returns an error with the given code and message.
func New(code uint, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Newf returns an error with the given code and a formatted message.
func Newf(code uint, format string, a ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, a...)}
}

// Invalid is the spec's "invalid network config" error (code 7); the message names the
// field first, as "mtu: must be ...".
func Invalid(format string, a ...any) *Error {
	return Newf(CodeInvalidConfig, format, a...)
}

// WithDetails returns a copy of e carrying details.
func (e *Error) WithDetails(details string) *Error {
	c := *e
	c.Details = details
	return &c
}

func (e *Error) Error() string {
	if e.Details == "" {
		return e.Msg
	}
	return e.Msg + "; " + e.Details
}

// JSON encodes e as the spec's error object.
func (e *Error) JSON() []byte {
	b, _ := json.MarshalIndent(e, "", "    ")
	return b
}

// From turns any error into a CNI error: a typed *Error anywhere in the chain keeps its
// code (and the outer context is kept in the message); anything else becomes code 999,
// as the reference skeleton does for untyped errors.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		if msg := err.Error(); msg != ce.Error() {
			// The outer context is kept in the message; the details, which ce.Error()
			// already put at the end of msg, stay in their own field only.
			if ce.Details != "" {
				msg = strings.Replace(msg, ce.Error(), ce.Msg, 1)
			}
			return &Error{CNIVersion: ce.CNIVersion, Code: ce.Code, Msg: msg, Details: ce.Details}
		}
		return ce
	}
	return &Error{Code: CodeInternal, Msg: err.Error()}
}

// Code reports the CNI code of err, or 0 when err carries none.
func Code(err error) uint {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return 0
}
