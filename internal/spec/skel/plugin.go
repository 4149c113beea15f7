// Package skel is the spec layer every plugin runs on: it turns CNI_* variables and the
// stdin config into a validated Request, negotiates the spec version, calls the plugin's
// callback for the command, and writes the result or a CNI error in the config's version.
// It has two entry points: Run for an exec'd process and Invoke for in-process callers
// (IPAM delegation, the chain runner), which share every rule.
package skel

import (
	"cmp"
	"context"
	"io"
	"iter"

	"github.com/cnikit/cni/internal/result"
)

// The CNI commands.
const (
	CmdAdd     = "ADD"
	CmdDel     = "DEL"
	CmdCheck   = "CHECK"
	CmdGC      = "GC"
	CmdStatus  = "STATUS"
	CmdVersion = "VERSION"

	// CmdRepair is no spec command: the chain runner sends it in-process only (`cni
	// repair`, `cni status`), never through CNI_COMMAND, which refuses it (Run).
	CmdRepair = "REPAIR"
)

// Plugin is one built-in plugin: what it is called, what it speaks, and one callback per
// command. A nil GC or Status callback succeeds, as the spec lets a plugin that keeps no
// such state answer.
type Plugin struct {
	Name     string
	About    string
	Versions []string

	Add    func(*Request) (*result.Result, error)
	Del    func(*Request) error
	Check  func(*Request) error
	GC     func(*Request) error
	Status func(*Request) error
	// Repair puts back the host-side objects of the attachment of PrevResult that a
	// host firewall reload removed (rules, map elements, a redirect), touching nothing
	// in the container, no IPAM and no link: each object found missing is reported to
	// Request.Repair, which says whether to put it back (not in a dry run). Nil: the
	// plugin keeps nothing on the host that a reload removes.
	Repair func(*Request) error

	// Subcommands are programs of the plugin's own, run as `<name> <subcommand> [args]`
	// (the dhcp daemon). A runtime passes no arguments, so a call is never taken for one.
	Subcommands map[string]Subcommand
}

// Subcommand runs with the arguments after its name and returns the exit status.
type Subcommand func(args, env []string, stdout, stderr io.Writer) int

// Request is everything a callback needs about one invocation.
type Request struct {
	// ctx is the invocation's context; Context never returns nil, whoever built the
	// request.
	ctx  context.Context
	Args Args
	// Config is the request configuration exactly as received on stdin.
	Config []byte
	// Net holds the fields the spec gives every plugin config.
	Net NetConf
	// PrevResult is the parsed prevResult, already converted to Net.CNIVersion.
	PrevResult *result.Result
	// ValidAttachments is the GC list of attachments that are still in use.
	ValidAttachments []Attachment
	// Stderr is for logs; stdout belongs to the result.
	Stderr io.Writer

	// repair records what a REPAIR found missing (InvokeRepair).
	repair *Repair
	// plugin is the name of the plugin the request is for ("" when not built by skel);
	// probe marks a copy for checking a config without acting on it (Probe).
	plugin string
	probe  bool
}

// Valid yields the container id and interface name of each attachment a GC must keep,
// for helpers that take plain values rather than skel's types.
func (r *Request) Valid() iter.Seq2[string, string] {
	return func(yield func(containerID, ifName string) bool) {
		for _, a := range r.ValidAttachments {
			if !yield(a.ContainerID, a.IfName) {
				return
			}
		}
	}
}

// Attachment names one (container, interface) pair in a GC request.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// GCAttachments is the one rule for the list a GC config carries:
// "cni.dev/valid-attachments" (valid), or, when that is missing, null or empty,
// "cni.dev/attachments" (legacy, the key's name in the spec-v1.1.0 tag; libcni sends
// both with the same list). An empty new key never outweighs a non-empty legacy one,
// which would collect every attachment the legacy list still names.
func GCAttachments(valid, legacy []Attachment) []Attachment {
	if len(valid) == 0 {
		return legacy
	}
	return valid
}

// Context is the invocation's context, never nil. It carries the process's Pending:
// work handed to Start with it runs concurrently and is waited for before the process
// answers.
func (r *Request) Context() context.Context {
	return cmp.Or(r.ctx, context.Background())
}

// WithContext returns a copy of r with its context replaced (nil means Background).
func (r *Request) WithContext(ctx context.Context) *Request {
	c := *r
	c.ctx = ctx
	return &c
}

// Probe returns a copy of r for checking its config before acting on it, as a main
// plugin checks its delegate's (ipam.Validate): LoadConfig warns of nothing for it, so
// the operator hears of a key once, from the load that acts on it.
func (r *Request) Probe() *Request {
	c := *r
	c.probe = true
	return &c
}

// UndoContext is the context for undoing a failed ADD. It carries the request's values
// but not its deadline: the likeliest reason an ADD failed is that its deadline passed,
// and the cleanup (an exec'd IPAM DEL, an iptables-restore) must still run.
func (r *Request) UndoContext() context.Context {
	return context.WithoutCancel(r.Context())
}
