package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// PluginName is the type of the chain plugin, whose config carries a nested list.
const PluginName = "chain"

// parseNested reads a chain plugin's config: the list of plugins and the list keys
// libcni reads from a conflist, as a Network without the name and version, which are
// the runtime's (load). Every error is an invalid config (code 7)
// naming the key, down to the child (`plugins[2].type`): a chain inside a chain, an
// empty list and a child without a type are refused, as is anything Parse refuses in a
// conflist's list.
func parseNested(data []byte) (*Network, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "chain: config must be a JSON object")
	}
	list, ok := raw["plugins"]
	if !ok {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "chain: plugins: missing (the list of plugins to run)")
	}
	var children []json.RawMessage
	if err := json.Unmarshal(list, &children); err != nil {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "chain: plugins: must be a list of plugin objects, got %s", clip(list))
	}
	if len(children) == 0 {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "chain: plugins: the list is empty")
	}
	n := &Network{Plugins: make([]PluginConf, 0, len(children)), Bytes: data}
	for i, c := range children {
		pc, err := parseChild(c)
		if err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "chain: plugins[%d]%s", i, err)
		}
		n.Plugins = append(n.Plugins, pc)
	}
	for key, dst := range map[string]*bool{"disableCheck": &n.DisableCheck, "disableGC": &n.DisableGC} {
		var err error
		if *dst, err = readBool(raw, key); err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "chain: %v", err)
		}
	}
	return n, nil
}

// parseChild reads one plugin object of the nested list. Its errors start with the key
// they concern (".type: ...", ": ..." for the object itself), for parseNested to put the
// child's index in front.
func parseChild(data json.RawMessage) (PluginConf, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return PluginConf{}, fmt.Errorf(": must be a plugin object, got %s", clip(data))
	}
	rawType, ok := obj["type"]
	if !ok {
		return PluginConf{}, fmt.Errorf(".type: missing")
	}
	var typ string
	if err := json.Unmarshal(rawType, &typ); err != nil {
		return PluginConf{}, fmt.Errorf(".type: must be a string, got %s", clip(rawType))
	}
	switch {
	case typ == "":
		return PluginConf{}, fmt.Errorf(".type: empty")
	case strings.ContainsRune(typ, os.PathSeparator) || typ == "." || typ == "..":
		return PluginConf{}, fmt.Errorf(".type: %q must be a plugin name, not a path", typ)
	case typ == PluginName:
		return PluginConf{}, fmt.Errorf(".type: a chain cannot be nested in a chain; list its plugins here instead")
	}
	var caps map[string]bool
	if c, ok := obj["capabilities"]; ok {
		if err := json.Unmarshal(c, &caps); err != nil {
			return PluginConf{}, fmt.Errorf(".capabilities: must map capability names to true or false, got %s", clip(c))
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return PluginConf{}, fmt.Errorf(": %v", err)
	}
	return PluginConf{Type: typ, Capabilities: caps, Bytes: compact.Bytes()}, nil
}

// Children returns the plugins nested in a chain plugin's config, or an invalid-config
// error (code 7) saying what is wrong with it. It is for tools that show a config, such
// as `cni ls`.
func Children(pc PluginConf) ([]PluginConf, error) {
	n, err := parseNested(pc.Bytes)
	if err != nil {
		return nil, err
	}
	return n.Plugins, nil
}

// clip shortens a JSON value quoted in an error message.
func clip(v []byte) string {
	const limit = 60
	if len(v) <= limit {
		return string(v)
	}
	return string(v[:limit]) + "..."
}
