package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// resultSeeds are the golden samples of every version plus odd but valid shapes.
func resultSeeds() []string {
	var out []string
	for _, v := range allVersions {
		for _, s := range []string{sample02, sample04, sample1} {
			out = append(out, fmt.Sprintf(s, v))
		}
	}
	return append(out,
		`{"cniVersion":"1.0.0","ips":[{"address":"::ffff:10.0.0.2/104","gateway":"::ffff:10.0.0.1"}]}`,
		`{"cniVersion":"0.4.0","ips":[{"address":"10.0.0.2/8"},{"version":"4","address":"fd00::2/64","interface":-1}]}`,
		`{"cniVersion":"0.2.0","ip4":{"ip":"fd00::2/64","routes":[{"dst":"10.0.0.0/8"}]}}`,
		`{"cniVersion":"1.1.0","interfaces":[{"name":""}],"ips":[{"address":"10.0.0.2/8","interface":7}],"dns":{}}`,
		`{"cniVersion":null,"ip6":{"ip":"fd00::2/64"}}`,
		`null`, `{}`, `{"cniVersion":"1.2.0"}`, `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2"}]}`,
	)
}

// FuzzParse reads results of any version: a refusal is code 6 (undecodable) or 1 (an
// unknown version); an accepted result prints, and printing is a fixed point of
// parse-then-print.
func FuzzParse(f *testing.F) {
	for _, s := range resultSeeds() {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "0.4.0")
	}
	f.Fuzz(func(t *testing.T, data []byte, defaultVersion string) {
		r, err := Parse(data, defaultVersion)
		if err != nil {
			if c := cnierror.Code(err); c != cnierror.CodeDecode && c != cnierror.CodeIncompatibleVersion {
				t.Fatalf("refused with code %d: %v", c, err)
			}
			return
		}
		if _, ok := shapeOf(r.CNIVersion); !ok {
			t.Fatalf("accepted version %q", r.CNIVersion)
		}
		b := requireEncodes(t, r)
		r2, err := Parse(b, "")
		if err != nil {
			t.Fatalf("%s prints as %s, which does not parse: %v", data, b, err)
		}
		if b2 := requireEncodes(t, r2); !bytes.Equal(b, b2) {
			t.Fatalf("print(parse(print(x))) != print(x)\nfirst:  %s\nsecond: %s", b, b2)
		}
		var pretty bytes.Buffer
		if err := r.Print(&pretty); err != nil {
			t.Fatalf("Print: %v", err)
		}
	})
}

// FuzzConvert converts a parsed result to every version (and some unknown ones): an
// unknown target and a down-conversion with no address left are code 1, anything else
// converts without touching the source, to a result in the target version that is
// exactly what its own JSON carries (it prints and parses back to the same JSON).
// Within a family only the version changes, and 0.3.x/0.4.0 to 1.x and back loses
// nothing.
func FuzzConvert(f *testing.F) {
	for _, s := range resultSeeds() {
		f.Add([]byte(s))
	}
	targets := append(slices.Clone(allVersions), "", "0.5.0", "1.2.0", "x")
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data, "")
		if err != nil {
			return
		}
		before := requireEncodes(t, r)
		for _, to := range targets {
			c, err := r.Convert(to)
			if err != nil {
				if cnierror.Code(err) != cnierror.CodeIncompatibleVersion {
					t.Fatalf("%s to %q: code %d: %v", r.CNIVersion, to, cnierror.Code(err), err)
				}
				continue
			}
			want := to
			if want == "" {
				want = "0.1.0"
			}
			if c.CNIVersion != want {
				t.Fatalf("converted to %q, got version %q", to, c.CNIVersion)
			}
			b := requireEncodes(t, c)
			back, err := Parse(b, "")
			if err != nil {
				t.Fatalf("%s converted to %s prints %s, which does not parse: %v", r.CNIVersion, want, b, err)
			}
			if !equalResults(back, c) {
				t.Fatalf("%s converted to %s is not what its JSON says\nconverted: %#v\nits JSON:  %#v", r.CNIVersion, want, c, back)
			}
			from, _ := shapeOf(r.CNIVersion)
			if target, _ := shapeOf(want); target == from {
				if !bytes.Equal(b, sameVersion(before, r.CNIVersion, want)) {
					t.Fatalf("%s to %s within a family changed more than the version\nbefore: %s\nafter:  %s", r.CNIVersion, want, before, b)
				}
			}
			if from == shape04 && strings.HasPrefix(want, "1.") {
				down, err := c.Convert(r.CNIVersion)
				if err != nil || !bytes.Equal(requireEncodes(t, down), before) {
					t.Fatalf("%s to %s and back lost something (%v)\nbefore: %s\nafter:  %s", r.CNIVersion, want, err, before, requireEncodes(t, down))
				}
			}
		}
		if after := requireEncodes(t, r); !bytes.Equal(before, after) {
			t.Fatalf("Convert changed its source\nbefore: %s\nafter:  %s", before, after)
		}
	})
}

func requireEncodes(t *testing.T, r *Result) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("a valid result does not encode: %v\n%#v", err, r)
	}
	return b
}

// sameVersion rewrites the version of an encoded result, the first key in every shape.
func sameVersion(b []byte, from, to string) []byte {
	return bytes.Replace(b, []byte(`{"cniVersion":"`+from+`"`), []byte(`{"cniVersion":"`+to+`"`), 1)
}

// equalResults compares two models, taking nil and empty lists alike (JSON cannot
// tell them apart).
func equalResults(a, b *Result) bool {
	return reflect.DeepEqual(normalized(a), normalized(b))
}

func normalized(r *Result) *Result {
	c := r.Clone()
	for _, l := range []*[]string{&c.DNS.Nameservers, &c.DNS.Search, &c.DNS.Options} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if len(c.Interfaces) == 0 {
		c.Interfaces = nil
	}
	if len(c.IPs) == 0 {
		c.IPs = nil
	}
	if len(c.Routes) == 0 {
		c.Routes = nil
	}
	return c
}
