package skel

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/result"
)

// NetConf holds the keys the spec defines for every plugin config.
type NetConf struct {
	CNIVersion    string          `json:"cniVersion,omitempty"`
	Name          string          `json:"name,omitempty"`
	Type          string          `json:"type,omitempty"`
	Capabilities  map[string]bool `json:"capabilities,omitempty"`
	IPAM          IPAM            `json:"ipam,omitempty"`
	DNS           *DNS            `json:"dns,omitempty"`
	RawPrevResult json.RawMessage `json:"prevResult,omitempty"`
	RuntimeConfig json.RawMessage `json:"runtimeConfig,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	// Log is the plugin's invocation log object (internal/obs/invlog), read by skel.
	Log json.RawMessage `json:"log,omitempty"`

	ValidAttachments  []Attachment `json:"cni.dev/valid-attachments,omitempty"`
	LegacyAttachments []Attachment `json:"cni.dev/attachments,omitempty"`
}

// IPAM is the part of the "ipam" object every IPAM type shares.
type IPAM struct {
	Type string `json:"type,omitempty"`
}

// DNS is the config's "dns" object, the same JSON as a 0.x result's.
type DNS = result.WireDNS

// LoadConfig decodes the request configuration into a plugin's own config type. A value
// of the wrong type is an invalid config (code 7) whose message names the field. A key
// the type does not know is accepted, as runtimes add keys of their own; an ADD warns of
// it on stderr and in the invocation log, naming the nearest key the type knows
// (warnUnknownKeys), so that a mistyped key does not pass unseen.
func LoadConfig[T any](req *Request) (*T, error) {
	conf := new(T)
	if err := json.Unmarshal(req.Config, conf); err != nil {
		return nil, ConfigDecodeError(req.Net.Type, err)
	}
	WarnUnknownKeys[T](req)
	return conf, nil
}

// WarnUnknownKeys is LoadConfig's warning of the keys config type T does not know, for
// a plugin that decodes its config by other means (or has no keys of its own: T
// struct{}). It warns on ADD only, where a key takes effect, and not for a Probe.
func WarnUnknownKeys[T any](req *Request) {
	if req.Args.Command == CmdAdd && !req.probe {
		warnUnknownKeys(req, reflect.TypeFor[T]())
	}
}

// ConfigDecodeError is the invalid-config error (code 7) for err, what decoding plugin
// type typ's config with encoding/json returned. A value of the wrong type is named in
// the config's words: Go's own text names the field by Go type ("Config.backend"),
// which an operator never wrote.
func ConfigDecodeError(typ string, err error) *cnierror.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" && te.Type != nil {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %s: must be %s, got a JSON %s",
			typ, te.Field, jsonKind(te.Type), te.Value)
	}
	return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: invalid network config: %v", typ, err)
}

// jsonKind names what JSON value decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return fmt.Sprintf("a whole number from %d to %d", -1<<(t.Bits()-1), 1<<(t.Bits()-1)-1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return fmt.Sprintf("a whole number from 0 to %d", 1<<t.Bits()-1)
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return "a whole number from 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "of type " + t.String()
}

// parseNetConf decodes the common keys and checks them against the plugin and command.
func parseNetConf(p *Plugin, command string, data []byte) (NetConf, *result.Result, error) {
	var conf NetConf
	if err := json.Unmarshal(data, &conf); err != nil {
		if err := netConfDecodeError(p, command, err); err != nil {
			return conf, nil, err
		}
	}
	v := version.OrDefault(conf.CNIVersion)
	if _, _, _, err := version.Parse(v); err != nil {
		return conf, nil, cnierror.Newf(cnierror.CodeDecode, "decoding version from network config: %v", err)
	}
	if !slices.Contains(p.Versions, v) {
		// Marked: no ADD with this config can have run the plugin (invoke).
		return conf, nil, cnierror.CannotRun(cnierror.New(cnierror.CodeIncompatibleVersion, "incompatible CNI versions").
			WithDetails(fmt.Sprintf("config is %q, plugin supports %q", v, p.Versions)))
	}
	if min := minVersion(command); min != "" && !version.AtLeast(v, min) {
		return conf, nil, cnierror.Newf(cnierror.CodeIncompatibleVersion,
			"config version %q does not allow command %s (needs %s or later)", v, command, min)
	}
	if err := ValidateNetworkName(conf.Name); err != nil {
		return conf, nil, err
	}
	conf.ValidAttachments = GCAttachments(conf.ValidAttachments, conf.LegacyAttachments)
	prev, err := parsePrevResult(conf.RawPrevResult, v)
	return conf, prev, err
}

// netConfDecodeError is the error of a config whose common keys do not decode. Bad
// JSON is code 6 for every command. A key of the wrong type ("ipam": "x") is code 7
// naming it, but for DEL, which goes on with the keys that did decode (encoding/json
// fills every other field) and the mistyped one left empty: ADD refuses this very
// config, so it made nothing that key would be needed to find (an empty ipam type
// releases nothing), and the runtime would retry a failing DEL of the pod for ever.
// DEL is best effort and must succeed when there is nothing to undo (spec: DEL).
func netConfDecodeError(p *Plugin, command string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return cnierror.Newf(cnierror.CodeDecode, "decoding network config: %v", err)
	}
	if command == CmdDel {
		return nil
	}
	return ConfigDecodeError(p.Name, err)
}

func minVersion(command string) string {
	switch command {
	case CmdCheck:
		return "0.4.0"
	case CmdGC, CmdStatus:
		return "1.1.0"
	}
	return ""
}

// parsePrevResult reads a prevResult in the config's version family and converts it to
// the config's exact version.
func parsePrevResult(raw json.RawMessage, confVersion string) (*result.Result, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	prev, err := result.Parse(raw, confVersion)
	if err != nil {
		return nil, fmt.Errorf("parsing prevResult: %w", err)
	}
	if !result.SameShape(prev.CNIVersion, confVersion) {
		return nil, cnierror.Newf(cnierror.CodeIncompatibleVersion,
			"prevResult version %q does not match config version %q", prev.CNIVersion, confVersion)
	}
	converted, err := prev.Convert(confVersion)
	if err != nil {
		return nil, fmt.Errorf("converting prevResult: %w", err)
	}
	return converted, nil
}
