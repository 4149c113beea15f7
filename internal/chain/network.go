package chain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/spec/skel"
)

// DefaultConfDir is where runtimes and cnitool look for network configurations.
const DefaultConfDir = "/etc/cni/net.d"

// MaxFileSize caps every configuration file read, as containerd does: a runaway file
// must not make the runtime allocate without bound.
const MaxFileSize = 2 << 20

// Network is one network configuration list: the network's name, the negotiated spec
// version and the plugins to run, in order.
type Network struct {
	Name string
	// CNIVersion is the version every plugin is called with, negotiated from
	// "cniVersion" and "cniVersions".
	CNIVersion             string
	DisableCheck           bool
	DisableGC              bool
	LoadOnlyInlinedPlugins bool
	Plugins                []PluginConf
	// Bytes is the configuration as read; the result cache stores it.
	Bytes []byte
	// File is the file the configuration came from, empty when parsed from bytes.
	File string
	// Shadowed are the files after File that define the same network: runtimes (and
	// libcni) take the first and never read them, so neither does Load, but an edit to
	// one of them has no effect, which a caller should say.
	Shadowed []string
}

// PluginConf is one plugin object of a list.
type PluginConf struct {
	Type         string
	Capabilities map[string]bool
	// Bytes is the plugin object as written (compacted), before the runner injects
	// name, cniVersion, prevResult and runtimeConfig.
	Bytes []byte
}

// Types returns the plugin types of the list, in order.
func (n *Network) Types() []string {
	out := make([]string, len(n.Plugins))
	for i, p := range n.Plugins {
		out[i] = p.Type
	}
	return out
}

// ParsePlugin reads one plugin object. It must have a "type" that names a plugin
// (no path separator), and "capabilities", if present, must map names to booleans.
func ParsePlugin(data []byte) (PluginConf, error) {
	var head struct {
		Type         *string         `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return PluginConf{}, fmt.Errorf("plugin config: %w", err)
	}
	switch {
	case head.Type == nil || *head.Type == "":
		return PluginConf{}, errors.New("plugin config: missing 'type'")
	case strings.ContainsRune(*head.Type, os.PathSeparator):
		return PluginConf{}, fmt.Errorf("plugin config: type %q must be a plugin name, not a path", *head.Type)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return PluginConf{}, fmt.Errorf("plugin config: %w", err)
	}
	return PluginConf{Type: *head.Type, Capabilities: head.Capabilities, Bytes: compact.Bytes()}, nil
}

// Parse reads a configuration list from bytes, as libcni's NetworkConfFromBytes does,
// without drop-in plugins. Errors are *InvalidError.
func Parse(data []byte) (*Network, error) {
	n, err := parseList(data)
	if err != nil {
		return nil, &InvalidError{Err: err}
	}
	if len(n.Plugins) == 0 {
		return nil, &InvalidError{Err: errors.New("no plugin configs found")}
	}
	return n, nil
}

// parseList reads the list keys; the plugin list may be empty when "plugins" is absent,
// because drop-in files may still supply the plugins.
func parseList(data []byte) (*Network, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parsing configuration list: %w", err)
	}
	if raw == nil {
		return nil, errors.New("parsing configuration list: not a JSON object")
	}
	n := &Network{Bytes: data}
	if err := decodeKey(raw, "name", &n.Name); err != nil {
		return nil, err
	}
	if _, ok := raw["name"]; !ok {
		return nil, errors.New("parsing configuration list: no name")
	}
	if err := skel.ValidateNetworkName(n.Name); err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	v, err := negotiateVersion(raw)
	if err != nil {
		return nil, err
	}
	n.CNIVersion = v
	for key, dst := range map[string]*bool{
		"disableCheck": &n.DisableCheck, "disableGC": &n.DisableGC, "loadOnlyInlinedPlugins": &n.LoadOnlyInlinedPlugins,
	} {
		if *dst, err = readBool(raw, key); err != nil {
			return nil, err
		}
	}
	plugins, ok := raw["plugins"]
	if !ok {
		if n.LoadOnlyInlinedPlugins {
			return nil, errors.New("loadOnlyInlinedPlugins is true, and there is no 'plugins' key")
		}
		return n, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(plugins, &list); err != nil {
		return nil, fmt.Errorf("plugins: must be a list of plugin objects: %w", err)
	}
	if len(list) == 0 {
		return nil, errors.New("plugins: no plugins in list")
	}
	for i, p := range list {
		pc, err := ParsePlugin(p)
		if err != nil {
			return nil, fmt.Errorf("plugins[%d]: %w", i, err)
		}
		n.Plugins = append(n.Plugins, pc)
	}
	return n, nil
}

func decodeKey(raw map[string]json.RawMessage, key string, dst *string) error {
	v, ok := raw[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s: must be a string, got %s", key, v)
	}
	return nil
}

// negotiateVersion picks the highest version of cniVersion and cniVersions that this
// toolkit speaks (at most version.Current). Without cniVersions, or when every listed
// version is newer, cniVersion is used as written, as libcni does.
func negotiateVersion(raw map[string]json.RawMessage) (string, error) {
	var v string
	if err := decodeKey(raw, "cniVersion", &v); err != nil {
		return "", err
	}
	if _, _, _, err := version.Parse(v); err != nil {
		return "", fmt.Errorf("cniVersion: %w", err)
	}
	listed, ok := raw["cniVersions"]
	if !ok {
		return v, nil
	}
	var vs []string
	if err := json.Unmarshal(listed, &vs); err != nil {
		return "", fmt.Errorf("cniVersions: must be a list of strings, got %s", listed)
	}
	best := ""
	consider := func(c string) {
		if version.Compare(c, version.Current) <= 0 && (best == "" || version.Compare(c, best) > 0) {
			best = c
		}
	}
	for i, c := range vs {
		if _, _, _, err := version.Parse(c); err != nil {
			return "", fmt.Errorf("cniVersions[%d]: %w", i, err)
		}
		consider(c)
	}
	if v != "" {
		consider(v)
	}
	return cmp.Or(best, v), nil
}

// readBool accepts a JSON boolean or the strings "true"/"false" in any case.
func readBool(raw map[string]json.RawMessage, key string) (bool, error) {
	v, ok := raw[key]
	if !ok {
		return false, nil
	}
	var b bool
	if json.Unmarshal(v, &b) == nil {
		return b, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fmt.Errorf("%s: must be true or false, got %s", key, v)
}

// LoadFile reads a .conflist file and, unless loadOnlyInlinedPlugins is set, appends the
// drop-in plugins of <dir>/<name>/*.conf.
func LoadFile(path string) (*Network, error) {
	_, n, err := readParsed(path, parseList)
	if err != nil {
		return nil, err
	}
	n.File = path
	if !n.LoadOnlyInlinedPlugins {
		dir := filepath.Join(filepath.Dir(path), n.Name)
		files, err := configFiles(dir, ".conf")
		if err != nil {
			return nil, &InvalidError{File: dir, Err: fmt.Errorf("reading plugin drop-ins: %w", err)}
		}
		for _, f := range files {
			_, pc, err := readParsed(f, ParsePlugin)
			if err != nil {
				return nil, err
			}
			n.Plugins = append(n.Plugins, pc)
		}
	}
	if len(n.Plugins) == 0 {
		return nil, &InvalidError{File: path, Err: errors.New("no plugin configs found")}
	}
	return n, nil
}

// legacyFile reads a single-plugin .conf/.json file (deprecated, still loaded by libcni)
// and returns its network name and plugin.
func legacyFile(path string) (name string, pc PluginConf, err error) {
	data, pc, err := readParsed(path, ParsePlugin)
	if err != nil {
		return "", PluginConf{}, err
	}
	var head struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(data, &head) // ParsePlugin has checked it is an object
	return head.Name, pc, nil
}

// wrapLegacy turns a single-plugin config into a one-element list, as libcni's
// ConfListFromConf does: the list bytes are rebuilt from name, cniVersion and plugin.
func wrapLegacy(path string, pc PluginConf) (*Network, error) {
	var head struct {
		Name       string `json:"name"`
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(pc.Bytes, &head); err != nil {
		return nil, &InvalidError{File: path, Err: err}
	}
	data, err := json.Marshal(map[string]any{
		"name": head.Name, "cniVersion": head.CNIVersion, "plugins": []json.RawMessage{pc.Bytes},
	})
	if err != nil {
		return nil, &InvalidError{File: path, Err: err}
	}
	n, err := Parse(data)
	if err != nil {
		return nil, &InvalidError{File: path, Err: errors.Unwrap(err)}
	}
	n.File = path
	return n, nil
}

// Load finds the network called name in dir the way libcni's LoadNetworkConf does:
// sorted *.conflist files first (a file that fails to parse before the match aborts the
// search), then the deprecated single-plugin *.conf and *.json files. The first file
// that defines the network wins, as it does for libcni and the runtimes, so that an
// attachment a runtime made is checked and deleted with the config it was made with
// (a node with flannel's manifest and ours holds two files of cbr0); unlike libcni,
// the files it shadows are named in Network.Shadowed rather than silently ignored.
func Load(dir, name string) (*Network, error) {
	lists, err := configFiles(dir, ".conflist")
	if err != nil {
		return nil, &InvalidError{File: dir, Err: err}
	}
	for i, f := range lists {
		n, err := LoadFile(f)
		if err != nil {
			return nil, err
		}
		if n.Name == name {
			n.Shadowed = shadowed(dir, name, f, lists[i+1:])
			return n, nil
		}
	}
	singles, err := configFiles(dir, ".conf", ".json")
	if err != nil {
		return nil, &InvalidError{File: dir, Err: err}
	}
	if len(lists) == 0 && len(singles) == 0 {
		return nil, &NoConfigsError{Dir: dir}
	}
	for i, f := range singles {
		netName, pc, err := legacyFile(f)
		if err != nil {
			return nil, err
		}
		if netName == name {
			n, err := wrapLegacy(f, pc)
			if err != nil {
				return nil, err
			}
			n.Shadowed = shadowed(dir, name, f, singles[i+1:])
			return n, nil
		}
	}
	return nil, &NotFoundError{Dir: dir, Name: name}
}

// shadowed lists the files of rest (and, after a .conflist winner, every legacy file)
// that also define the network name: which file wins depends on sort order, and an
// edit to a losing one silently has no effect.
func shadowed(dir, name, winner string, rest []string) []string {
	others := rest
	if filepath.Ext(winner) == ".conflist" {
		singles, _ := configFiles(dir, ".conf", ".json")
		others = append(slices.Clip(rest), singles...)
	}
	var out []string
	for _, f := range others {
		data, err := readConfig(f)
		if err != nil {
			continue // only a file that names the network can shadow it
		}
		var head struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(data, &head) == nil && head.Name == name {
			out = append(out, f)
		}
	}
	return out
}

// Entry is one configuration file found by List: the network it defines, or why it
// cannot be used.
type Entry struct {
	File    string
	Network *Network
	Err     error
}

// List reads every configuration file of dir (.conflist, then .conf and .json, each
// sorted), for listing: an unusable file is reported in its Entry, not as an error.
func List(dir string) ([]Entry, error) {
	lists, err := configFiles(dir, ".conflist")
	if err != nil {
		return nil, err
	}
	singles, err := configFiles(dir, ".conf", ".json")
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, f := range lists {
		n, err := LoadFile(f)
		out = append(out, Entry{File: f, Network: n, Err: err})
	}
	for _, f := range singles {
		e := Entry{File: f}
		_, pc, err := legacyFile(f)
		if err == nil {
			e.Network, err = wrapLegacy(f, pc)
		}
		e.Err = err
		out = append(out, e)
	}
	return out, nil
}

// configFiles lists the regular files of dir with one of exts, sorted. A missing dir has
// none.
func configFiles(dir string, exts ...string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !slices.Contains(exts, filepath.Ext(e.Name())) {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	slices.Sort(out)
	return out, nil
}

// readParsed reads a configuration file and parses it, naming the file in a parse error.
func readParsed[T any](path string, parse func([]byte) (T, error)) (data []byte, v T, err error) {
	if data, err = readConfig(path); err == nil {
		if v, err = parse(data); err != nil {
			err = &InvalidError{File: path, Err: err}
		}
	}
	return data, v, err
}

// readConfig reads a configuration file of at most MaxFileSize bytes.
func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &InvalidError{File: path, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &InvalidError{File: path, Err: err}
	}
	if len(data) > MaxFileSize {
		return nil, &InvalidError{File: path, Err: fmt.Errorf("file is larger than %d bytes", MaxFileSize)}
	}
	return data, nil
}
