// Package skeltest drives a plugin's config loading through skel's own ADD path, for
// fuzz targets and tests: the config is checked by skel exactly as for a real ADD
// (spec keys, version, network name, prevResult), and the plugin's loader then runs
// where its ADD would, so nothing reaches the kernel. It also holds the properties every
// config loader shares: a refused config is a typed CNI error with a config code, and an
// accepted one, written back out, is accepted again with the same settings.
package skeltest

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
)

// AddArgs are the CNI_* inputs of an ADD that never reaches a namespace: the netns
// path is never opened by a loader, and the own-netns check is off so nothing is
// stat()ed.
func AddArgs(cniArgs string) skel.Args {
	return skel.Args{
		Command: skel.CmdAdd, ContainerID: "fuzz-ctr", Netns: "/var/run/netns/fuzz", IfName: "eth0",
		CNIArgs: cniArgs, Path: []string{"/opt/cni/bin"}, NetnsOverride: true,
	}
}

// Loaded is what one run of Load saw.
type Loaded[T any] struct {
	// Req is the request skel handed to the loader; nil when skel refused the config
	// before the loader ran.
	Req *skel.Request
	// Value is what the loader returned.
	Value T
	// Err is the error of the whole path as a runtime would see it: skel's own
	// refusal or the loader's, as a *cnierror.Error.
	Err error
}

// Load runs config as an ADD of p with args, calling load where p's ADD would run.
func Load[T any](p *skel.Plugin, args skel.Args, config []byte, load func(*skel.Request) (T, error)) Loaded[T] {
	var out Loaded[T]
	q := *p
	q.Add = func(req *skel.Request) (*result.Result, error) {
		out.Req = req
		v, err := load(req)
		if err != nil {
			return nil, err
		}
		out.Value = v
		return &result.Result{CNIVersion: req.Net.CNIVersion}, nil
	}
	_, out.Err = skel.Invoke(context.Background(), &q, args, config, io.Discard)
	return out
}

// configCodes are the codes a refused config may carry: incompatible version (1), bad
// CNI_ARGS or interface name (4), undecodable (6), invalid (7). Anything else (999
// above all) means a case the loader did not think of.
var configCodes = []uint{
	cnierror.CodeIncompatibleVersion, cnierror.CodeInvalidEnv, cnierror.CodeDecode, cnierror.CodeInvalidConfig,
}

// loaderCodes are the codes a loader itself may refuse with: it sees a config skel
// already decoded, so only bad values remain.
var loaderCodes = []uint{cnierror.CodeInvalidEnv, cnierror.CodeInvalidConfig}

// RequireConfigError fails t unless l.Err is nil or a CNI error with a config code:
// 4 or 7 from the loader, also 1 or 6 from skel before it.
func RequireConfigError[T any](t testing.TB, l Loaded[T]) {
	t.Helper()
	if l.Err == nil {
		return
	}
	codes := configCodes
	if l.Req != nil {
		codes = loaderCodes
	}
	if code := cnierror.Code(l.Err); !slices.Contains(codes, code) {
		t.Fatalf("refused with code %d, want one of %v: %v", code, codes, l.Err)
	}
}

// Accepted is Load followed by RequireConfigError, for a fuzz target that goes on to
// check what an accepted config gives: it says whether config was accepted.
func Accepted[T any](t testing.TB, p *skel.Plugin, args skel.Args, config []byte, load func(*skel.Request) (T, error)) (Loaded[T], bool) {
	t.Helper()
	l := Load(p, args, config, load)
	RequireConfigError(t, l)
	return l, l.Err == nil
}

// Remarshal writes an accepted config back out: the spec keys skel read, overlaid by
// the plugin's own config struct conf as json.Marshal writes it. What the original
// said under other spellings of a key (JSON keys match case-insensitively) is gone, so
// reading the result again must give the same settings.
func Remarshal(net skel.NetConf, conf any) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	for _, v := range []any{net, conf} {
		if v == nil {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			return nil, err
		}
		maps.Copy(doc, keys)
	}
	return json.Marshal(doc)
}

// RequireStable fails t unless the config rewritten by Remarshal loads again with the
// same value; conf is the plugin's config struct as it decoded l's config.
func RequireStable[T any](t testing.TB, p *skel.Plugin, l Loaded[T], conf any, load func(*skel.Request) (T, error)) {
	t.Helper()
	if l.Err != nil || l.Req == nil {
		return
	}
	again, err := Remarshal(l.Req.Net, conf)
	if err != nil {
		t.Fatalf("re-marshal an accepted config: %v", err)
	}
	l2 := Load(p, l.Req.Args, again, load)
	if l2.Err != nil {
		t.Fatalf("accepted config refused after re-marshalling: %v\nconfig:  %s\nwritten: %s", l2.Err, l.Req.Config, again)
	}
	if !reflect.DeepEqual(l.Value, l2.Value) {
		t.Fatalf("settings changed after re-marshalling\nconfig:  %s\nwritten: %s\nfirst:  %+v\nsecond: %+v",
			l.Req.Config, again, l.Value, l2.Value)
	}
}

// Request is what skel hands a plugin's callbacks for config and CNI_ARGS, for a test of
// the plugin's loader alone: the spec keys decoded as far as they decode, the rest left
// to the loader.
func Request(config []byte, cniArgs string) *skel.Request {
	req := &skel.Request{Config: config, Args: skel.Args{CNIArgs: cniArgs}}
	_ = json.Unmarshal(config, &req.Net)
	return req
}

// Refused reports whether a loader refused config with err; it fails t unless the
// refusal is a CNI error with one of codes (CodeInvalidConfig when none are given).
func Refused(t testing.TB, config []byte, err error, codes ...uint) bool {
	t.Helper()
	if err == nil {
		return false
	}
	if len(codes) == 0 {
		codes = []uint{cnierror.CodeInvalidConfig}
	}
	if code := cnierror.From(err).Code; !slices.Contains(codes, code) {
		t.Fatalf("code %d for %q, want one of %v: %v", code, config, codes, err)
	}
	return true
}

// RequireUsableMTU fails t unless an accepted mtu is unset (0) or one a link can have.
func RequireUsableMTU(t testing.TB, mtu int) {
	t.Helper()
	if mtu != 0 && (mtu < 68 || mtu > 65535) {
		t.Fatalf("accepted mtu %d", mtu)
	}
}

// Decided is what an ADD has decided before it touches anything: the plugin's config
// and what it works out from it next (masquerade options, ...).
type Decided[C, D any] struct {
	Conf C
	Next D
}

// Then is a loader that runs load, then next on the config, as the plugin's ADD does,
// so that a fuzz target covers both.
func Then[C, D any](load func(*skel.Request) (C, error), next func(C) (D, error)) func(*skel.Request) (Decided[C, D], error) {
	return func(req *skel.Request) (out Decided[C, D], err error) {
		if out.Conf, err = load(req); err != nil {
			return Decided[C, D]{}, err
		}
		if out.Next, err = next(out.Conf); err != nil {
			return Decided[C, D]{}, err
		}
		return out, nil
	}
}
