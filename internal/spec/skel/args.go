package skel

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/ifname"
	"github.com/cnikit/cni/internal/obs/invlog"
)

// Args are the CNI_* inputs of one invocation.
type Args struct {
	Command     string
	ContainerID string
	Netns       string
	IfName      string
	// CNIArgs is CNI_ARGS as given; plugins parse it with ParseCNIArgs.
	CNIArgs string
	Path    []string
	// NetnsOverride turns off the "CNI_NETNS is my own namespace" safety check.
	NetnsOverride bool
	// Env is the full environment of the invocation, handed on unchanged (but for
	// CNI_COMMAND) to delegates that are exec'd. Nil for pure in-process calls.
	Env []string
	// LogFile and LogLevel are CNI_LOG_FILE and CNI_LOG_LEVEL: the invocation log of a
	// whole node (see internal/obs/invlog), which a config's "log" object overrides.
	LogFile, LogLevel string
}

// ArgsFromEnv reads the CNI_* variables from an environment list.
func ArgsFromEnv(env []string) Args {
	a := Args{Env: env}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "CNI_COMMAND":
			a.Command = v
		case "CNI_CONTAINERID":
			a.ContainerID = v
		case "CNI_NETNS":
			a.Netns = v
		case "CNI_IFNAME":
			a.IfName = v
		case "CNI_ARGS":
			a.CNIArgs = v
		case "CNI_PATH":
			a.Path = filepath.SplitList(v)
		case "CNI_NETNS_OVERRIDE":
			a.NetnsOverride = v == "1" || strings.EqualFold(v, "true")
		case invlog.EnvFile:
			a.LogFile = v
		case invlog.EnvLevel:
			a.LogLevel = v
		}
	}
	return a
}

// Environ returns the environment a delegate exec'd for command should see: the
// invocation's own environment with the CNI_* variables set from a.
func (a Args) Environ(command string) []string {
	cni := []string{
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=" + a.ContainerID,
		"CNI_NETNS=" + a.Netns,
		"CNI_IFNAME=" + a.IfName,
		"CNI_ARGS=" + a.CNIArgs,
		"CNI_PATH=" + strings.Join(a.Path, string(os.PathListSeparator)),
	}
	out := make([]string, 0, len(a.Env)+len(cni))
	for _, kv := range a.Env {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(cni, func(set string) bool { return strings.HasPrefix(set, k+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, cni...)
}

// missing lists the variables the reference skeleton insists on that are empty:
// CNI_PATH always, CNI_CONTAINERID and CNI_IFNAME but for GC and STATUS, CNI_NETNS for
// ADD, CHECK and REPAIR.
func (a Args) missing() []string {
	attachment := a.Command != CmdGC && a.Command != CmdStatus
	var out []string
	for _, v := range [...]struct {
		name, value string
		required    bool
	}{
		{"CNI_CONTAINERID", a.ContainerID, attachment},
		{"CNI_NETNS", a.Netns, attachment && a.Command != CmdDel},
		{"CNI_IFNAME", a.IfName, attachment},
		{"CNI_PATH", strings.Join(a.Path, ":"), true},
	} {
		if v.required && v.value == "" {
			out = append(out, v.name)
		}
	}
	return out
}

// validate checks the variables a command needs, reporting every missing one at once.
func (a Args) validate() error {
	switch a.Command {
	case CmdAdd, CmdDel, CmdCheck, CmdGC, CmdStatus, CmdRepair:
	default:
		return cnierror.Newf(cnierror.CodeInvalidEnv, "unknown CNI_COMMAND: %s", a.Command)
	}
	if missing := a.missing(); len(missing) > 0 {
		return cnierror.Newf(cnierror.CodeInvalidEnv, "required env variables [%s] missing", strings.Join(missing, ","))
	}
	if a.nothingToDelete() != nil {
		return nil // DEL succeeds doing nothing (invoke): refused, it would fail for ever
	}
	if a.ContainerID != "" {
		if err := ValidateContainerID(a.ContainerID); err != nil {
			return err
		}
	}
	if a.IfName == "" {
		return nil
	}
	return ValidateIfName(a.IfName)
}

// nothingToDelete says why a DEL has nothing to delete: no ADD can have attached its
// container id and interface name (Attachable). Nil for every other command.
func (a Args) nothingToDelete() error {
	if a.Command != CmdDel {
		return nil
	}
	return Attachable(a.ContainerID, a.IfName)
}

// validID applies the spec's ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ by hand: a package-level
// regexp would be compiled at start-up of every plugin exec.
func validID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// ValidateContainerID applies the spec's container id rule.
func ValidateContainerID(id string) error {
	return checkID(cnierror.CodeInvalidEnv, id, "missing containerID", "invalid characters in containerID %q")
}

// checkID applies validID to s, an id or name of the spec: the error has code and says
// missing, or invalid (a format for s).
func checkID(code uint, s, missing, invalid string) error {
	if s == "" {
		return cnierror.New(code, missing)
	}
	if !validID(s) {
		return cnierror.Newf(code, invalid, s)
	}
	return nil
}

// Attachable says why no ADD, libcni's, the reference plugins' or ours, can have
// attached containerID as ifName, or returns nil: a container id against the spec's
// rule, an interface name the kernel refuses (ifname.CheckKernel). A DEL or GC of such an
// attachment has nothing to delete, and succeeds without doing anything. (A name with a
// control character, which the kernel takes and our ADD refuses, is attachable: libcni
// and the reference may have made it.)
func Attachable(containerID, ifName string) error {
	if err := ValidateContainerID(containerID); err != nil {
		return err
	}
	return ifname.CheckKernel(ifName)
}

// ValidateIfName applies ifname.Check to CNI_IFNAME (code 4, naming it).
func ValidateIfName(name string) error {
	if err := ifname.Check(name); err != nil {
		return cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_IFNAME: %v", err)
	}
	return nil
}

// ValidateIfNameField applies ifname.Check to an interface name read from the config or
// its prevResult (code 7, naming the field), and refuses the names no link may have
// (ifname.KernelReserved): a config naming a bridge or VRF so is at fault.
func ValidateIfNameField(field, name string) error {
	if err := ifname.Check(name); err != nil {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %v", field, err)
	}
	if ifname.KernelReserved(name) {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "%s: %q names the kernel's interface defaults (net.ipv4.conf.%s), which no link may be called", field, name, name)
	}
	return nil
}

// ValidateNetworkName applies the spec's network name rule (code 7).
func ValidateNetworkName(name string) error {
	return checkID(cnierror.CodeInvalidConfig, name, "missing network name", "invalid characters found in network name %q")
}

// ParseCNIArgs parses CNI_ARGS ("K=V;K2=V2") into a map. Keys outside known are an error
// unless IgnoreUnknown is 1 or true, as in the reference library.
func ParseCNIArgs(raw string, known ...string) (map[string]string, error) {
	out := map[string]string{}
	if raw == "" {
		return out, nil
	}
	for _, pair := range strings.Split(raw, ";") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_ARGS: invalid pair %q", pair)
		}
		out[kv[0]] = kv[1]
	}
	if ignore := out["IgnoreUnknown"]; ignore == "1" || strings.EqualFold(ignore, "true") {
		return out, nil
	}
	for k := range out {
		if k != "IgnoreUnknown" && !slices.Contains(known, k) {
			return nil, cnierror.Newf(cnierror.CodeInvalidEnv, "CNI_ARGS: unknown key %q", k)
		}
	}
	return out, nil
}
