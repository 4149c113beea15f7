package plugintest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// Config is the JSON of base with the keys of each of over laid on it in turn; a nil
// value removes a key. base is not changed.
func Config(t testing.TB, base map[string]any, over ...map[string]any) []byte {
	t.Helper()
	c := make(map[string]any, len(base))
	for _, m := range append([]map[string]any{base}, over...) {
		for k, v := range m {
			if v == nil {
				delete(c, k)
				continue
			}
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return b
}

// Merged is one map of the keys of maps, a later map's over an earlier's; nil values
// are kept (Config removes those keys).
func Merged(maps ...map[string]any) map[string]any {
	m := map[string]any{}
	for _, kv := range maps {
		for k, v := range kv {
			m[k] = v
		}
	}
	return m
}

// WithPrev returns conf with res as its prevResult, as a runtime sends it to CHECK and
// to the next plugin of a chain.
func WithPrev(t testing.TB, conf []byte, res *result.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, res.Print(&buf))
	return WithPrevJSON(t, conf, buf.Bytes())
}

// WithPrevJSON returns conf with prev, a result as a plugin printed it, as its
// prevResult.
func WithPrevJSON(t testing.TB, conf, prev []byte) []byte {
	t.Helper()
	return WithKeys(t, conf, map[string]any{"prevResult": json.RawMessage(prev)})
}

// WithKeys returns conf, a JSON object, with keys laid over its own; a nil value
// removes a key.
func WithKeys(t testing.TB, conf []byte, keys map[string]any) []byte {
	t.Helper()
	var c map[string]any
	require.NoError(t, json.Unmarshal(conf, &c))
	return Config(t, c, keys)
}

// HostLocal is a host-local ipam section over dataDir with one range set per subnet.
func HostLocal(dataDir string, subnets ...string) map[string]any {
	ranges := make([]any, 0, len(subnets))
	for _, s := range subnets {
		ranges = append(ranges, []any{map[string]any{"subnet": s}})
	}
	return map[string]any{"type": "host-local", "dataDir": dataDir, "ranges": ranges}
}

// Code is the CNI error code a runtime would see for err: 0 for nil, 999 for an error
// that carries none.
func Code(err error) uint {
	if err == nil {
		return 0
	}
	return cnierror.From(err).Code
}

// Object is the JSON object of members, each one or more `"key":value` texts as a test
// writes them; empty ones are left out.
func Object(members ...string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, m := range members {
		if m == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(m)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// PrevMember is the `"prevResult":...` member of an Object holding res as printed, ""
// when res is nil.
func PrevMember(t testing.TB, res *result.Result) string {
	t.Helper()
	if res == nil {
		return ""
	}
	var buf bytes.Buffer
	require.NoError(t, res.Print(&buf))
	return `"prevResult":` + buf.String()
}

// LongID is a container id of n bytes in libcni's alphabet (letters, digits, "_.-"),
// for the limits of names derived from ids.
func LongID(n int) string {
	const alphabet = "0123456789abcdefABCDEF_.-"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[i%len(alphabet)]
	}
	b[0] = 'c'
	return string(b)
}

// ForEachDataDirThatIsNoDirectory runs body as a subtest for each data dir that cannot
// be one, "file/" (a regular file) and "file/sub" (a path below one), made in a temp dir
// of the subtest.
func ForEachDataDirThatIsNoDirectory(t *testing.T, body func(t *testing.T, dataDir string)) {
	for _, below := range []string{"", "sub"} {
		t.Run("file"+filepath.Join("/", below), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "afile")
			require.NoError(t, os.WriteFile(file, nil, 0o600))
			body(t, filepath.Join(file, below))
		})
	}
}
