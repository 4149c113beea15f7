package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// WrapList rewrites a configuration list so that the runtime runs it as one process per
// operation: its plugins move, as written, into the list of a single chain plugin, and
// the chain declares every capability the plugins declare (the runtime passes runtime
// config only for the capabilities of the plugins it sees). The list keeps its name,
// cniVersion and every other key, so a runtime's cache entries and GC still match.
//
// Only a list whose plugins are all built in is wrapped (builtIn says which types are):
// a plugin that is not would still be a process of its own, exec'd by the chain, and the
// list would still cost two. Such a list is refused, naming the plugin, and should be
// installed as it is. A list that already is one chain plugin comes back unchanged.
func WrapList(data []byte, builtIn func(typ string) bool) ([]byte, error) {
	n, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if len(n.Plugins) == 1 && n.Plugins[0].Type == PluginName {
		return data, nil
	}
	caps := map[string]bool{}
	children := make([][]byte, len(n.Plugins))
	for i, p := range n.Plugins {
		switch {
		case p.Type == PluginName:
			return nil, fmt.Errorf("plugins[%d].type: a chain plugin cannot be nested in another", i)
		case !builtIn(p.Type):
			return nil, fmt.Errorf("plugins[%d].type: %q is not built into cni, so it would still be exec'd on its own; "+
				"install this list as it is (with --conf), or remove that plugin", i, p.Type)
		}
		for c, on := range p.Capabilities {
			if on {
				caps[c] = true
			}
		}
		children[i] = p.Bytes
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, err
	}
	wrapper := []field{{"type", json.RawMessage(`"` + PluginName + `"`)}}
	if len(caps) > 0 {
		c, err := json.Marshal(caps)
		if err != nil {
			return nil, err
		}
		wrapper = append(wrapper, field{"capabilities", c})
	}
	wrapper = append(wrapper, field{"plugins", array(children)})
	return writeList(top, object(wrapper))
}

// field is one key of a JSON object written in a chosen order.
type field struct {
	key   string
	value json.RawMessage
}

func object(fields []field) json.RawMessage {
	members := make([][]byte, len(fields))
	for i, f := range fields {
		k, _ := json.Marshal(f.key) // a string always encodes
		members[i] = append(append(k, ':'), f.value...)
	}
	return enclose('{', members, '}')
}

func array(items [][]byte) json.RawMessage { return enclose('[', items, ']') }

// enclose joins items with commas between open and close.
func enclose(open byte, items [][]byte, close byte) json.RawMessage {
	return append(append([]byte{open}, bytes.Join(items, []byte{','})...), close)
}

// writeList writes a list's keys as people write them: cniVersion and name first,
// plugins (the one given) last, the others in between in name order; indented, ending
// in a newline.
func writeList(top map[string]json.RawMessage, plugin json.RawMessage) ([]byte, error) {
	var fields []field
	for _, k := range []string{"cniVersion", "name"} {
		if v, ok := top[k]; ok {
			fields = append(fields, field{k, v})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "cniVersion" && k != "name" && k != "plugins" {
			fields = append(fields, field{k, top[k]})
		}
	}
	fields = append(fields, field{"plugins", array([][]byte{plugin})})
	var out bytes.Buffer
	if err := json.Indent(&out, object(fields), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
