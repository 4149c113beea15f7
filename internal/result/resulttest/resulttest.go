// Package resulttest holds the property every result a plugin or the chain runner
// prints must have, for the fuzz targets and tests of the packages that make results.
package resulttest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cnikit/cni/internal/result"
)

// RequireRoundTrips fails t unless res, which a plugin would print (or the runner
// cache), is read back by result.Parse (what the next plugin and the runtime do) to
// the same JSON.
func RequireRoundTrips(t testing.TB, res *result.Result) {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("result does not encode: %v\nresult: %+v", err, res)
	}
	back, err := result.Parse(b, "")
	if err != nil {
		t.Fatalf("result %s does not parse back: %v", b, err)
	}
	if b2, err := json.Marshal(back); err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("result changes in a round trip (%v)\nfirst:  %s\nsecond: %s", err, b, b2)
	}
}
