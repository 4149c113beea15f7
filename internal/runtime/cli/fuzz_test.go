package cli_test

import (
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/runtime/cli"
	"github.com/cnikit/cni/internal/spec/skel"
)

// FuzzParseCNIArgs checks the runtime side of CNI_ARGS (--cni-args, env CNI_ARGS) against
// the plugin side: an accepted string is exactly its pairs joined again (what the runner
// sends as CNI_ARGS), every key and value is non-empty without ';' or '=', and the
// plugins' parser reads the same pairs (the last of a repeated key winning).
func FuzzParseCNIArgs(f *testing.F) {
	for _, seed := range []string{
		"", "IP=10.1.0.5", "MAC=0a:58:0a:4d:00:97;IP=10.1.0.5/24,fd00::5/64;GATEWAY=10.1.0.1",
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", "IP=1;IP=2",
		"X=", "=y", "IP=a=b", ";", "a=b;",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pairs, err := cli.ParseCNIArgs(s)
		if err != nil {
			return
		}
		joined := make([]string, len(pairs))
		want := map[string]string{}
		for i, kv := range pairs {
			if kv[0] == "" || kv[1] == "" || strings.ContainsAny(kv[0]+kv[1], ";=") {
				t.Fatalf("%q gave pair %q", s, kv)
			}
			joined[i] = kv[0] + "=" + kv[1]
			want[kv[0]] = kv[1]
		}
		if strings.Join(joined, ";") != s {
			t.Fatalf("%q gave %q, which joins to %q", s, pairs, strings.Join(joined, ";"))
		}
		if s == "" {
			return
		}
		got, err := skel.ParseCNIArgs(s + ";IgnoreUnknown=1")
		if err != nil {
			t.Fatalf("plugins refuse CNI_ARGS %q that the runtime accepts: %v", s, err)
		}
		delete(got, "IgnoreUnknown")
		delete(want, "IgnoreUnknown")
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("CNI_ARGS %q: runtime reads %s=%q, plugins %q", s, k, v, got[k])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("CNI_ARGS %q: runtime reads %v, plugins %v", s, want, got)
		}
	})
}
