package result

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests hold our reader, writer and converters against the reference library
// itself (a test-only dependency): same JSON in, same JSON out.

func referenceJSON(t *testing.T, r types.Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return string(b)
}

func TestReferenceLibraryReadsWhatWeWrite(t *testing.T) {
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			r, err := Parse([]byte(sampleFor(v)), "")
			require.NoError(t, err)
			ours := encode(t, r)

			ref, err := create.Create(v, []byte(ours))
			require.NoError(t, err)
			assert.Equal(t, v, ref.Version())
			// Byte equality: the reference re-encodes exactly what we wrote.
			assert.Equal(t, ours, referenceJSON(t, ref))
		})
	}
}

func TestReferenceLibraryReadsOurPrintOutput(t *testing.T) {
	for _, v := range allVersions {
		r, err := Parse([]byte(sampleFor(v)), "")
		require.NoError(t, err)
		var buf jsonBuffer
		require.NoError(t, r.Print(&buf))
		ref, err := create.Create(v, buf)
		require.NoError(t, err, v)
		assert.Equal(t, encode(t, r), referenceJSON(t, ref), v)
	}
}

type jsonBuffer []byte

func (b *jsonBuffer) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

func TestConvertAgreesWithReferenceLibraryForEveryVersionPair(t *testing.T) {
	extra := map[string]string{
		"route of a family without address": `{"cniVersion":"%[1]s","ips":[{"version":"4","address":"10.0.0.2/8"}],` +
			`"routes":[{"dst":"::/0","gw":"fd00::1"},{"dst":"0.0.0.0/0","gw":"10.0.0.1","mtu":1300}]}`,
	}
	for _, from := range allVersions {
		for _, to := range allVersions {
			inputs := map[string]string{"sample": sampleFor(from)}
			if sh, _ := shapeOf(from); sh != shape02 {
				for name, tmpl := range extra {
					in := golden(tmpl, from)
					if sh == shape1 {
						// 1.x has no ips[].version; the reference ignores it anyway.
						in = golden(`{"cniVersion":"%[1]s","ips":[{"address":"10.0.0.2/8"}],`+
							`"routes":[{"dst":"::/0","gw":"fd00::1"},{"dst":"0.0.0.0/0","gw":"10.0.0.1","mtu":1300}]}`, from)
					}
					inputs[name] = in
				}
			}
			for name, in := range inputs {
				t.Run(from+"->"+to+"/"+name, func(t *testing.T) {
					ref, err := create.Create(from, []byte(in))
					require.NoError(t, err)
					refOut, err := ref.GetAsVersion(to)
					require.NoError(t, err)

					r, err := Parse([]byte(in), "")
					require.NoError(t, err)
					out, err := r.Convert(to)
					require.NoError(t, err)
					assert.Equal(t, referenceJSON(t, refOut), encode(t, out))
				})
			}
		}
	}
}

func TestConvertFailsWhereReferenceLibraryFails(t *testing.T) {
	tests := []struct{ from, in, to string }{
		{"1.0.0", `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}`, "0.2.0"},
		{"0.4.0", `{"cniVersion":"0.4.0"}`, "0.1.0"},
		{"1.1.0", `{"cniVersion":"1.1.0"}`, "1.2.0"},
		{"0.2.0", `{"cniVersion":"0.2.0"}`, "2.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.from+"->"+tt.to, func(t *testing.T) {
			ref, err := create.Create(tt.from, []byte(tt.in))
			require.NoError(t, err)
			_, refErr := ref.GetAsVersion(tt.to)
			require.Error(t, refErr)

			r, err := Parse([]byte(tt.in), "")
			require.NoError(t, err)
			_, err = r.Convert(tt.to)
			require.Error(t, err)
			assert.Equal(t, refErr.Error(), err.Error())
		})
	}
}

// referenceResults builds one result per shape with the reference library's own Go
// types, so the JSON below is written by the reference, not by us.
func referenceResults(t *testing.T) map[shape]func(v string) types.Result {
	cidr := func(s string) net.IPNet {
		n, err := types.ParseCIDR(s)
		require.NoError(t, err)
		return *n
	}
	dns := types.DNS{Nameservers: []string{"10.1.0.1", "fd00::1"}, Domain: "example.org", Search: []string{"a.org", "b.org"}, Options: []string{"ndots:5"}}
	zero, one := 0, 1
	return map[shape]func(v string) types.Result{
		shape02: func(v string) types.Result {
			return &types020.Result{
				CNIVersion: v,
				IP4: &types020.IPConfig{IP: cidr("192.168.1.7/24"), Gateway: net.ParseIP("192.168.1.1"),
					Routes: []types.Route{{Dst: cidr("0.0.0.0/0"), GW: net.ParseIP("192.168.1.1")}, {Dst: cidr("10.0.0.0/8"), Priority: 4}}},
				IP6: &types020.IPConfig{IP: cidr("2001:db8::7/64")},
				DNS: dns,
			}
		},
		shape04: func(v string) types.Result {
			return &types040.Result{
				CNIVersion: v,
				Interfaces: []*types040.Interface{{Name: "veth1", Mac: "0a:58:0a:01:00:01"}, {Name: "eth0", Sandbox: "/run/netns/x"}},
				IPs: []*types040.IPConfig{
					{Version: "6", Interface: &one, Address: cidr("2001:db8::7/64"), Gateway: net.ParseIP("2001:db8::1")},
					{Version: "4", Interface: &zero, Address: cidr("192.168.1.7/24")},
				},
				Routes: []*types.Route{{Dst: cidr("2001:db8:1::/48"), GW: net.ParseIP("2001:db8::1"), Scope: &zero}},
				DNS:    types.DNS{},
			}
		},
		shape1: func(v string) types.Result {
			return &types100.Result{
				CNIVersion: v,
				Interfaces: []*types100.Interface{{Name: "eth0", Mac: "0a:58:0a:01:00:01", Mtu: 1450, Sandbox: "/run/netns/x", SocketPath: "/tmp/s", PciID: "0000:01:00.0"}},
				IPs:        []*types100.IPConfig{{Interface: &zero, Address: cidr("192.168.1.7/24"), Gateway: net.ParseIP("192.168.1.1")}},
				Routes: []*types.Route{{Dst: cidr("0.0.0.0/0"), GW: net.ParseIP("192.168.1.1"), MTU: 1400, AdvMSS: 1360, Priority: 9, Table: &one, Scope: &zero},
					{Dst: cidr("10.96.0.0/12")}},
				DNS: dns,
			}
		},
	}
}

func TestWeReadWhatReferenceLibraryWrites(t *testing.T) {
	builders := referenceResults(t)
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			sh, _ := shapeOf(v)
			refJSON := referenceJSON(t, builders[sh](v))
			r, err := Parse([]byte(refJSON), "")
			require.NoError(t, err)
			assert.Equal(t, v, r.CNIVersion)
			assert.Equal(t, refJSON, encode(t, r))
		})
	}
}

func TestWeReadReferenceLibraryModelContent(t *testing.T) {
	refJSON := referenceJSON(t, referenceResults(t)[shape1]("1.1.0"))
	r, err := Parse([]byte(refJSON), "")
	require.NoError(t, err)
	require.Len(t, r.Interfaces, 1)
	assert.Equal(t, Interface{Name: "eth0", Mac: "0a:58:0a:01:00:01", MTU: 1450, Sandbox: "/run/netns/x", SocketPath: "/tmp/s", PciID: "0000:01:00.0"}, r.Interfaces[0])
	require.Len(t, r.IPs, 1)
	assert.Equal(t, "192.168.1.7/24", r.IPs[0].Address.String())
	assert.Equal(t, "192.168.1.1", r.IPs[0].Gateway.String())
	assert.Equal(t, 0, *r.IPs[0].Interface)
	require.Len(t, r.Routes, 2)
	assert.Equal(t, Route{Dst: r.Routes[0].Dst, GW: r.Routes[0].GW, MTU: 1400, AdvMSS: 1360, Priority: 9, Table: ptr(1), Scope: ptr(0)}, r.Routes[0])
	assert.Equal(t, "0.0.0.0/0", r.Routes[0].Dst.String())
	assert.Equal(t, "10.96.0.0/12", r.Routes[1].Dst.String())
	assert.Equal(t, []string{"a.org", "b.org"}, r.DNS.Search)
}

func TestParseMatchesLibcniOnResultsWithoutVersion(t *testing.T) {
	// libcni (invoke.ExecPluginWithResult) reads a result without "cniVersion" in the
	// config's version; the same bytes parsed with that version by create.Create must
	// mean the same thing as our Parse with that default.
	// ("version" is ignored by the 1.x reader; see TestEncodeDerivesIPVersionFromTheAddress.)
	in := `{"ips":[{"version":"4","address":"10.0.0.2/8","gateway":"10.0.0.1"}],"routes":[{"dst":"0.0.0.0/0"}]}`
	for _, v := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		r, err := Parse([]byte(in), v)
		require.NoError(t, err)
		fixed := `{"cniVersion":"` + v + `",` + in[1:]
		ref, err := create.Create(v, []byte(fixed))
		require.NoError(t, err)
		assert.Equal(t, referenceJSON(t, ref), encode(t, r), v)
	}
}
