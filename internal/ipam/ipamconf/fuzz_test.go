package ipamconf

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
)

// FuzzArgs decodes the "args" object as the IPAM types read it and parses each
// requested address both ways they do (with a prefix length, and plain): a refusal is a
// config error naming the field; an accepted address is IPv4 in its 4-byte form, as
// the reference canonicalises it, and prints the way the result writes it.
func FuzzArgs(f *testing.F) {
	for _, seed := range []string{
		`{"cni":{"ips":["10.1.0.5/24","fd00::5/64"]}}`,
		`{"cni":{"ips":["10.1.0.5","::ffff:10.1.0.6","fe80::1%eth0"]}}`,
		`{"cni":{"ips":["::ffff:10.0.0.0/90","10.0.0.1/33",""]}}`,
		`{"cni":{}}`, `{"cni":null}`, `{}`, `{"cni":{"ips":"10.1.0.5"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a Args
		if json.Unmarshal(data, &a) != nil || a.CNI == nil {
			return
		}
		for i, s := range a.CNI.IPs {
			field := Field("args.cni.ips", i)
			if p, err := ParseCIDR(field, s); err != nil {
				requireNamed(t, err, field)
			} else if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
				t.Fatalf("%q parsed as %v", s, p)
			}
			if a, err := ParseAddr(field, s); err != nil {
				requireNamed(t, err, field)
			} else if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
				t.Fatalf("%q parsed as %v", s, a)
			}
		}
	})
}

// FuzzRoutes validates ipam.routes: a refusal is a config error naming the route; the
// accepted routes go into a result that prints and reads back unchanged, which is what
// the next plugin in the chain does with them.
func FuzzRoutes(f *testing.F) {
	for _, seed := range []string{
		`[{"dst":"0.0.0.0/0"},{"dst":"192.168.0.0/16","gw":"10.10.5.1"},{"dst":"3ffe:ffff:0:01ff::1/64"}]`,
		`[{"dst":"::/0","gw":"fd00::1","mtu":1400,"advmss":1360,"priority":10,"table":100,"scope":253}]`,
		`[{"dst":"::ffff:10.0.0.0/104","gw":"::ffff:10.0.0.1"}]`,
		`[{"dst":"fe80::/64","gw":"fe80::1%eth0"}]`,
		`[{"dst":"10.0.0.0/8","gw":"10.0.0.256"}]`, `[{"dst":"default"}]`, `[{}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in []Route
		if json.Unmarshal(data, &in) != nil {
			return
		}
		routes, err := Routes("ipam.routes", in)
		if err != nil {
			requireNamed(t, err, "ipam.routes[")
			return
		}
		for _, v := range []string{"0.4.0", "1.1.0"} {
			res := &result.Result{CNIVersion: v, Routes: routes}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatalf("routes %s do not encode: %v", data, err)
			}
			back, err := result.Parse(b, "")
			if err != nil {
				t.Fatalf("routes %s encode as %s, which does not parse: %v", data, b, err)
			}
			if b2, _ := json.Marshal(back); string(b2) != string(b) {
				t.Fatalf("routes change in a round trip\nfirst:  %s\nsecond: %s", b, b2)
			}
		}
	})
}

func requireNamed(t *testing.T, err error, field string) {
	t.Helper()
	if cnierror.Code(err) != cnierror.CodeInvalidConfig || !strings.Contains(err.Error(), field) {
		t.Fatalf("refusal is not a config error naming %s: %v", field, err)
	}
}
