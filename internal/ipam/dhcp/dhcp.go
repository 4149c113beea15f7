// Package dhcp is the dhcp IPAM plugin: it asks the dhcp daemon (package daemon, the
// same binary run as `dhcp daemon`) for the attachment's DHCPv4 lease and returns it as
// the IPAM result. The daemon does the DHCP work because a lease must be renewed long
// after the plugin has exited.
//
// ADD calls DHCP.Allocate and DEL DHCP.Release, as the reference plugin does, so it
// works with the reference daemon and the reference plugin works with ours. CHECK, GC
// and STATUS use methods the reference daemon lacks (Check, GC, Status); against it
// CHECK falls back to Allocate (the reference's CHECK), GC does nothing, and STATUS only
// needs an answer.
package dhcp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/ipam/dhcp/daemon"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/ipam/dhcp/wire"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Plugin returns the dhcp registry entry; `dhcp daemon` runs the daemon, `dhcp status`
// prints its counters.
func Plugin() *skel.Plugin {
	return &skel.Plugin{
		Name:        "dhcp",
		About:       "addresses from a DHCP server, through the dhcp daemon (run: dhcp daemon)",
		Versions:    version.All(),
		Add:         add,
		Del:         del,
		Check:       check,
		GC:          gc,
		Status:      status,
		Subcommands: map[string]skel.Subcommand{"daemon": daemon.Main, "status": statusMain},
	}
}

// Validate checks an ADD's config as ADD reads it, without asking the daemon: for a
// main plugin to call before it makes anything (ipam.Validate).
func Validate(req *skel.Request) error {
	_, err := dhcpconf.Parse(req.Config, req.Args.CNIArgs)
	return err
}

func add(req *skel.Request) (*result.Result, error) {
	conf, err := dhcpconf.Parse(req.Config, req.Args.CNIArgs)
	if err != nil {
		return nil, err
	}
	skel.WarnUnknownKeys[dhcpconf.NetConf](req)
	var reply wire.Result
	if err := call(req, conf.SocketPath, "DHCP.Allocate", &reply); err != nil {
		return nil, cniError(err)
	}
	res := reply.ToResult()
	if len(res.IPs) == 0 {
		return nil, cnierror.New(cnierror.CodeInternal, "dhcp: the daemon returned a lease without an address")
	}
	// A version left out is 1.0.0, the reference daemon's result type; skel converts the
	// result to the config's version.
	res.CNIVersion = cmp.Or(res.CNIVersion, "1.0.0")
	return res, nil
}

// del releases the lease. It reads only the socket path: a DEL must not fail on config
// it does not need. A daemon that cannot be reached is no failure: the lease stays on
// its disk, and the daemon releases it when it finds the namespace gone or on GC.
func del(req *skel.Request) error {
	err := call(req, socketPath(req.Config), "DHCP.Release", &wire.Empty{})
	if _, unreachable := errors.AsType[*wire.UnreachableError](err); unreachable {
		fmt.Fprintf(req.Stderr, "dhcp: DEL: %v; nothing released now\n", err)
		return nil
	}
	return cniError(err)
}

func check(req *skel.Request) error {
	return callOurs(req, "DHCP.Check", func(socket string) error {
		return call(req, socket, "DHCP.Allocate", &wire.Result{})
	})
}

func gc(req *skel.Request) error {
	return callOurs(req, "DHCP.GC", func(socket string) error {
		fmt.Fprintf(req.Stderr, "dhcp: GC: the daemon at %s cannot list its leases (a reference daemon?); nothing collected\n", socket)
		return nil
	})
}

// callOurs calls one of our daemon's own methods at the config's socket; against a
// daemon that lacks it (the reference's), fallback runs instead.
func callOurs(req *skel.Request, method string, fallback func(socket string) error) error {
	conf, err := dhcpconf.Parse(req.Config, req.Args.CNIArgs)
	if err != nil {
		return err
	}
	if err = call(req, conf.SocketPath, method, &wire.Empty{}); wire.IsUnknownMethod(err) {
		err = fallback(conf.SocketPath)
	}
	return cniError(err)
}

// status is 50 (not available) when the daemon cannot be reached; any answer, even the
// reference daemon's "no such method", means it is up.
func status(req *skel.Request) error {
	err := call(req, socketPath(req.Config), "DHCP.Status", &wire.Empty{})
	_, unreachable := errors.AsType[*wire.UnreachableError](err)
	switch {
	case err == nil || wire.IsUnknownMethod(err):
		return nil
	case unreachable:
		return cnierror.Newf(cnierror.CodeNotAvailable, "dhcp: %v", err)
	}
	return cniError(err)
}

// call sends the invocation to the daemon as the reference plugin does: its CNI_* values
// and the config bytes, with the netns path made absolute (the daemon's working
// directory is not ours).
func call(req *skel.Request, socket, method string, reply any) error {
	netns := req.Args.Netns
	if netns != "" {
		abs, err := filepath.Abs(netns)
		if err != nil {
			return cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_NETNS %q: %v", netns, err)
		}
		netns = abs
	}
	args := &wire.CmdArgs{
		ContainerID: req.Args.ContainerID, Netns: netns, IfName: req.Args.IfName,
		Args: req.Args.CNIArgs, Path: strings.Join(req.Args.Path, string(os.PathListSeparator)), StdinData: req.Config,
	}
	return wire.Call(req.Context(), socket, method, args, reply)
}

// cniError gives a daemon call's failure its CNI code: the daemon's own code when it
// sent one; a path that is no socket is the config's ipam.daemonSocketPath at fault (7);
// a daemon that refuses the caller is an internal error; a daemon that is not there or
// did not answer in time is "try again later" (11).
func cniError(err error) error {
	se, served := errors.AsType[wire.ServerError](err)
	_, unreachable := errors.AsType[*wire.UnreachableError](err)
	switch {
	case err == nil:
		return nil
	case served:
		return se.Err()
	case unreachable && errors.Is(err, wire.ErrNotSocket):
		return cnierror.Newf(cnierror.CodeInvalidConfig, "ipam.daemonSocketPath: %v", err)
	case errors.Is(err, wire.ErrRefused):
		return cnierror.Newf(cnierror.CodeInternal, "dhcp: %v", err) // no later try fares better
	case cnierror.Code(err) != 0:
		return err
	}
	return cnierror.Newf(cnierror.CodeTryAgainLater, "dhcp: %v", err)
}

// socketPath reads only ipam.daemonSocketPath.
func socketPath(config []byte) string {
	var raw struct {
		IPAM struct {
			DaemonSocketPath string `json:"daemonSocketPath"`
		} `json:"ipam"`
	}
	if json.Unmarshal(config, &raw) != nil || raw.IPAM.DaemonSocketPath == "" {
		return dhcpconf.DefaultSocketPath
	}
	return raw.IPAM.DaemonSocketPath
}
