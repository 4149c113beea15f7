package chain

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// FuzzParseNested feeds the chain plugin's config parser what a runtime may hand it. It
// must never panic; what it refuses is an invalid config (code 7) whose message names a
// key of the chain; what it accepts is a non-empty list of named, non-chain plugins whose
// objects are valid JSON.
func FuzzParseNested(f *testing.F) {
	seeds := []string{
		`{"cniVersion":"1.1.0","name":"std","type":"chain","capabilities":{"portMappings":true,"bandwidth":true},"plugins":[` +
			`{"type":"loopback"},{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}]]}},` +
			`{"type":"portmap","capabilities":{"portMappings":true}},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`,
		`{"type":"chain","plugins":[{"type":"chain","plugins":[]}]}`,
		`{"type":"chain","plugins":[]}`,
		`{"type":"chain","plugins":[{}]}`,
		`{"type":"chain","plugins":[{"type":"a/b"}]}`,
		`{"type":"chain","plugins":[{"type":"x","capabilities":{"a":1}}],"disableCheck":"TRUE","disableGC":false}`,
		`{"plugins":null}`,
		`[]`,
		`null`,
		`{"plugins":[null]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := parseNested(data)
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidConfig {
				t.Fatalf("code %d for %q: %v", cnierror.Code(err), data, err)
			}
			if !strings.HasPrefix(err.Error(), "chain: ") {
				t.Fatalf("message does not name the chain: %v", err)
			}
			return
		}
		if len(n.Plugins) == 0 {
			t.Fatalf("accepted an empty list: %q", data)
		}
		for i, pc := range n.Plugins {
			if pc.Type == "" || pc.Type == PluginName || strings.Contains(pc.Type, "/") {
				t.Fatalf("plugins[%d]: accepted type %q", i, pc.Type)
			}
			var obj map[string]any
			if err := json.Unmarshal(pc.Bytes, &obj); err != nil || obj["type"] != pc.Type {
				t.Fatalf("plugins[%d]: object %q does not hold its type: %v", i, pc.Bytes, err)
			}
		}
	})
}
