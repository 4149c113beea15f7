// Package wire is the protocol between the dhcp IPAM plugin and its daemon: Go's
// net/rpc over HTTP CONNECT on a unix socket, gob-encoded, exactly as the reference
// plugin and daemon speak it, so either side works with the reference's other side.
//
// It is written over encoding/gob rather than imported from net/rpc because net/rpc
// links net/http, html/template and crypto into the binary, and every plugin exec pays
// their init (see docs/dependencies.md for the measured cost). The framing is
// small: one CONNECT line and its answer, then a gob stream of (header, body) pairs.
package wire

import (
	"cmp"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// RPCPath is net/rpc's DefaultRPCPath, the only path the daemon answers.
const RPCPath = "/_goRPC_"

// connected is the status line net/rpc's server answers a CONNECT with.
const connected = "HTTP/1.0 200 Connected to Go RPC"

// forbidden answers a CONNECT from a caller the daemon does not serve; the reason follows
// as the body.
const forbidden = "HTTP/1.0 403 Forbidden"

// requestHeader and responseHeader are net/rpc's Request and Response, field for field:
// gob matches struct fields by name, so these decode what net/rpc encodes and back.
type requestHeader struct {
	ServiceMethod string
	Seq           uint64
}

type responseHeader struct {
	ServiceMethod string
	Seq           uint64
	Error         string
}

// invalidRequest is the body net/rpc sends with an error response.
type invalidRequest struct{}

// CmdArgs is the reference library's skel.CmdArgs, the argument of every daemon method:
// the invocation's CNI_* values and the config as it came on stdin.
type CmdArgs struct {
	ContainerID   string
	Netns         string
	IfName        string
	Args          string
	Path          string
	NetnsOverride string
	StdinData     []byte
}

// Result mirrors the reference library's current (1.x) Result with its net types, so
// gob sees the same wire types (net.IP travels as text) in both directions. Interfaces
// are left out: an IPAM result has none, and gob skips fields a side does not have.
type Result struct {
	CNIVersion string
	IPs        []IPConfig
	Routes     []Route
	DNS        result.DNS // gob matches fields by name: these are the reference's types.DNS
}

// IPConfig mirrors the reference's IPConfig.
type IPConfig struct {
	Interface *int
	Address   net.IPNet
	Gateway   net.IP
}

// Route mirrors the reference's types.Route.
type Route struct {
	Dst      net.IPNet
	GW       net.IP
	MTU      int
	AdvMSS   int
	Priority int
	Table    *int
	Scope    *int
}

// Empty is the reply of methods that return nothing (the reference's *struct{}).
type Empty struct{}

// Counters is the reply of DHCP.Counters (ours, `dhcp status`): the leases the daemon
// holds and what it did since it started, each a total over DHCPv4 and DHCPv6 (a
// dual-stack attachment holds two leases).
type Counters struct {
	Since time.Time
	Held  int64
	// Allocations are leases acquired for an ADD; AllocationFailures leases an ADD asked
	// a server for and did not get.
	Allocations, AllocationFailures int64
	// Releases are leases given back (DEL, GC, an expired lease replaced).
	Releases int64
	// Renewals are renewals and rebinds that extended the lease (a DHCPACK, a DHCPv6
	// REPLY); RenewalFailures those refused or unanswered; Expirations leases that ran
	// out.
	Renewals, RenewalFailures, Expirations int64
}

// Timeouts of the daemon's side of a connection: a client gets this long to send its
// handshake and each request, and the daemon this long to write each reply. The call
// itself (a DHCP exchange) is bounded by the daemon's own DHCP timeouts.
const (
	readTimeout  = 2 * time.Minute
	writeTimeout = 30 * time.Second
)

// codeMark ends the text of a daemon error that carries a CNI code, "... (CNI error
// code 11)": the reference plugin shows it as part of the message, ours turns it back
// into the code.
const codeMark = " (CNI error code "

// errorText is what the daemon sends for err.
func errorText(err error) string {
	msg := err.Error()
	if code := cnierror.Code(err); code != 0 {
		if ce := cnierror.From(err); ce != nil {
			msg = ce.Msg
		}
		msg += codeMark + strconv.FormatUint(uint64(code), 10) + ")"
	}
	return cmp.Or(msg, "unknown error")
}

// Err returns e as a typed CNI error when the daemon gave it a code.
func (e ServerError) Err() error {
	s := string(e)
	i := strings.LastIndex(s, codeMark)
	if i < 0 || !strings.HasSuffix(s, ")") {
		return e
	}
	code, err := strconv.ParseUint(s[i+len(codeMark):len(s)-1], 10, 32)
	if err != nil {
		return e
	}
	return cnierror.New(uint(code), s[:i])
}
