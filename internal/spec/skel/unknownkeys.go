package skel

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/cnikit/cni/internal/core/steps"
)

// A config key the plugin's config type does not know is accepted, as the reference
// accepts it: runtimes and tools add keys of their own. But a mistyped key ("isGatway")
// silently does nothing, so ADD warns of each one, once, on stderr and in the
// invocation log, naming the nearest key the plugin knows.
//
// The common case, a config with no such key, costs a walk over the config's bytes and
// a look at the config type's fields; the known keys are listed, and distances computed,
// only for a key that is unknown.

// warnUnknownKeys warns of the keys of the request's config that config type t (what
// LoadConfig decoded it into) does not know. The top level is the plugin's own only when
// the plugin is the config's type: a delegate (an IPAM type, handed its main plugin's
// config) owns only what its type declares below it ("ipam").
func warnUnknownKeys(req *Request, t reflect.Type) {
	owner := cmp.Or(req.plugin, req.Net.Type)
	topLevel := req.plugin == "" || req.plugin == req.Net.Type
	walkObject(req.Config, t, "", topLevel, func(path string, key []byte, fields func() []string) {
		msg := unknownKeyWarning(owner, path, string(key), fields())
		fmt.Fprintln(req.Stderr, msg)
		steps.Of(req.Context()).Warn(msg)
	})
}

// unknownKeyWarning is the warning for key, at path, among the known keys.
func unknownKeyWarning(plugin, path, key string, known []string) string {
	if near := nearest(key, known); near != "" {
		return fmt.Sprintf("%s: unknown config key %q (did you mean %q?); ignored", plugin, path+key, path+near)
	}
	return fmt.Sprintf("%s: unknown config key %q; ignored", plugin, path+key)
}

// walkObject calls unknown for each key of the JSON object data that struct type t does
// not know (for the top level only when checkOwn), and descends into the keys it knows
// whose values are objects, or lists of objects, of a struct type of their own.
func walkObject(data []byte, t reflect.Type, path string, checkOwn bool, unknown func(path string, key []byte, known func() []string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A type that reads its own JSON reads keys unknown to its fields too.
	if t.Kind() != reflect.Struct || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	var buf [64]field
	fields := appendFields(buf[:0], t)
	members(data, func(key, value []byte) {
		ft, ok := lookup(fields, key)
		switch {
		case !ok && (path == "" && specKey(key) || path == "ipam." && string(key) == "type"):
		case !ok:
			if checkOwn || path != "" {
				unknown(path, key, func() []string { return knownKeys(t, path) })
			}
		case path == "" && runtimeOwned(key):
			// What runtimes put there is theirs: capability args, CNI_ARGS-like args.
		default:
			walkValue(value, ft, path+string(key)+".", unknown)
		}
	})
}

// field is one key a struct type decodes, and the type of its value.
type field struct {
	name string
	typ  reflect.Type
}

// appendFields appends the keys struct t decodes (embedded structs' included) to out,
// reading t's fields once for all the keys of an object.
func appendFields(out []field, t reflect.Type) []field {
	for i := range t.NumField() {
		f := t.Field(i)
		name, tagged := jsonName(f)
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		switch {
		case name == "-":
		case f.Anonymous && !tagged && et.Kind() == reflect.Struct:
			out = appendFields(out, et)
		case f.IsExported():
			out = append(out, field{name, f.Type})
		}
	}
	return out
}

// lookup is the type of the field encoding/json decodes key into (case-insensitively,
// as it does).
func lookup(fields []field, key []byte) (reflect.Type, bool) {
	for _, f := range fields {
		if equalFold(key, f.name) {
			return f.typ, true
		}
	}
	return nil, false
}

// walkValue descends into value when it is an object (or a list of them) of a struct
// type.
func walkValue(value []byte, t reflect.Type, path string, unknown func(path string, key []byte, known func() []string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		walkObject(value, t, path, true, unknown)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return // json.RawMessage and other bytes
		}
		elements(value, func(v []byte) { walkValue(v, t.Elem(), path, unknown) })
	}
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// jsonName is the key encoding/json uses for f, and whether a tag gave it.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "-", true
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name, false
	}
	return name, true
}

// knownKeys lists the keys struct t decodes at path, and the spec's there: at the top
// level NetConf's, the keys the spec, libcni and the runtimes put in every plugin's
// config, whatever its type, which no plugin warns of.
func knownKeys(t reflect.Type, path string) []string {
	fields := appendFields(nil, t)
	switch path {
	case "":
		fields = appendFields(fields, reflect.TypeFor[NetConf]())
	case "ipam.":
		fields = append(fields, field{name: "type"})
	}
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// specKey reports whether key is one of NetConf's, without allocating
// (TestSpecKeysAreNetConfsKeys holds the two lists equal).
func specKey(key []byte) bool {
	switch string(key) {
	case "cniVersion", "name", "type", "capabilities", "ipam", "dns", "prevResult",
		"runtimeConfig", "args", "log", "cni.dev/valid-attachments", "cni.dev/attachments":
		return true
	}
	return false
}

// runtimeOwned reports whether the top-level key holds what a runtime writes, whose
// keys are the runtime's to choose.
func runtimeOwned(key []byte) bool {
	switch string(key) {
	case "args", "runtimeConfig", "prevResult", "capabilities":
		return true
	}
	return false
}

// nearest is the known key closest to key in edit distance (letter case aside), "" when
// none is close enough to be a likely typo: at most a third of the key's length, and 3.
func nearest(key string, known []string) string {
	best, bestDist := "", min(3, max(1, len(key)/3))+1
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the edit distance of a and b in bytes, a swap of two neighbours
// counting as one edit (the optimal string alignment distance): "mdoe" is one from "mode".
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// equalFold reports whether the ASCII key equals name but for letter case.
func equalFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		if lowerASCII(key[i]) != lowerASCII(name[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
