package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

func encode(t *testing.T, r *Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	return string(b)
}

func requireCode(t *testing.T, err error, code uint, msg string) {
	t.Helper()
	require.Error(t, err)
	var ce *cnierror.Error
	require.True(t, errors.As(err, &ce), "not a *cnierror.Error: %T %v", err, err)
	assert.Equal(t, code, ce.Code)
	assert.Contains(t, err.Error(), msg)
}

func TestParseThenEncodeGivesTheSameJSONForEveryVersion(t *testing.T) {
	for _, v := range allVersions {
		t.Run(v, func(t *testing.T) {
			in := sampleFor(v)
			r, err := Parse([]byte(in), "")
			require.NoError(t, err)
			assert.Equal(t, v, r.CNIVersion)
			assert.Equal(t, in, encode(t, r))
		})
	}
}

func TestParseBuildsTheModel(t *testing.T) {
	one, zero := 1, 0
	tests := []struct {
		name string
		in   string
		want *Result
	}{
		{
			name: "0.2.0 lists ip4 then ip6 and merges their routes",
			in:   sampleFor("0.2.0"),
			want: &Result{
				CNIVersion: "0.2.0",
				IPs: []IPConfig{
					{Address: netip.MustParsePrefix("10.1.0.5/24"), Gateway: netip.MustParseAddr("10.1.0.1")},
					{Address: netip.MustParsePrefix("fd00::5/64"), Gateway: netip.MustParseAddr("fd00::1")},
				},
				Routes: []Route{
					{Dst: netip.MustParsePrefix("0.0.0.0/0"), GW: netip.MustParseAddr("10.1.0.1")},
					{Dst: netip.MustParsePrefix("192.168.0.0/16"), MTU: 1400},
					{Dst: netip.MustParsePrefix("::/0"), GW: netip.MustParseAddr("fd00::1")},
				},
				DNS: DNS{Nameservers: []string{"10.1.0.1"}, Domain: "example.org", Search: []string{"example.org"}, Options: []string{"ndots:2"}},
			},
		},
		{
			name: "0.4.0 ignores interface mtu and keeps extended route fields",
			in: `{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","mtu":1400}],` +
				`"ips":[{"version":"4","interface":0,"address":"10.0.0.2/8"}],"routes":[{"dst":"10.0.0.0/8","priority":5,"scope":253}]}`,
			want: &Result{
				CNIVersion: "0.4.0",
				Interfaces: []Interface{{Name: "eth0"}},
				IPs:        []IPConfig{{Interface: &zero, Address: netip.MustParsePrefix("10.0.0.2/8")}},
				Routes:     []Route{{Dst: netip.MustParsePrefix("10.0.0.0/8"), Priority: 5, Scope: ptr(253)}},
			},
		},
		{
			name: "1.1.0 keeps every field",
			in: `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","mtu":1400,"sandbox":"/ns","socketPath":"/s","pciID":"p"}],` +
				`"ips":[{"interface":1,"address":"fd00::2/64","gateway":"fd00::1"}],` +
				`"routes":[{"dst":"::/0","gw":"fd00::1","mtu":1300,"advmss":1200,"priority":3,"table":7,"scope":0}],"dns":{"domain":"d"}}`,
			want: &Result{
				CNIVersion: "1.1.0",
				Interfaces: []Interface{{Name: "eth0", Mac: "aa:bb:cc:dd:ee:ff", MTU: 1400, Sandbox: "/ns", SocketPath: "/s", PciID: "p"}},
				IPs:        []IPConfig{{Interface: &one, Address: netip.MustParsePrefix("fd00::2/64"), Gateway: netip.MustParseAddr("fd00::1")}},
				Routes: []Route{{Dst: netip.MustParsePrefix("::/0"), GW: netip.MustParseAddr("fd00::1"),
					MTU: 1300, AdvMSS: 1200, Priority: 3, Table: ptr(7), Scope: ptr(0)}},
				DNS: DNS{Domain: "d"},
			},
		},
		{
			name: "an IPv4-mapped address is read as IPv4, as Go's net package reads it",
			in:   `{"cniVersion":"1.0.0","ips":[{"address":"::ffff:10.0.0.2/104","gateway":"::ffff:10.0.0.1"}]}`,
			want: &Result{
				CNIVersion: "1.0.0",
				IPs:        []IPConfig{{Address: netip.MustParsePrefix("10.0.0.2/8"), Gateway: netip.MustParseAddr("10.0.0.1")}},
			},
		},
		{
			name: "an empty gateway is no gateway",
			in:   `{"cniVersion":"0.3.1","ips":[{"version":"4","address":"10.0.0.2/8","gateway":""}]}`,
			want: &Result{CNIVersion: "0.3.1", IPs: []IPConfig{{Address: netip.MustParsePrefix("10.0.0.2/8")}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.in), "")
			require.NoError(t, err)
			assert.Equal(t, tt.want, r)
		})
	}
}

func ptr(v int) *int { return &v }

func TestParseVersionFallsBackToTheDefaultVersion(t *testing.T) {
	tests := []struct {
		name, in, def, want string
	}{
		{"missing cniVersion takes the config's version", `{"ips":[{"address":"10.0.0.2/8"}]}`, "1.0.0", "1.0.0"},
		{"empty cniVersion takes the config's version", `{"cniVersion":"","ips":[{"address":"10.0.0.2/8"}]}`, "0.4.0", "0.4.0"},
		{"null cniVersion takes the config's version", `{"cniVersion":null}`, "1.1.0", "1.1.0"},
		{"no version anywhere means 0.1.0", `{"ip4":{"ip":"10.0.0.2/8"}}`, "", "0.1.0"},
		{"the result's own version wins", `{"cniVersion":"0.3.0"}`, "1.1.0", "0.3.0"},
		{"null is an empty result in the config's version", `null`, "1.1.0", "1.1.0"},
		{"null without default is an empty 0.1.0 result", `null`, "", "0.1.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.in), tt.def)
			require.NoError(t, err)
			assert.Equal(t, tt.want, r.CNIVersion)
		})
	}
}

func TestParseNullGivesAnEmptyResult(t *testing.T) {
	r, err := Parse([]byte("null"), "1.0.0")
	require.NoError(t, err)
	assert.Equal(t, &Result{CNIVersion: "1.0.0"}, r)
}

func TestParseRejectsBadInput(t *testing.T) {
	tests := []struct {
		name, in, def string
		code          uint
		msg           string
	}{
		{"unknown result version", `{"cniVersion":"2.0.0"}`, "", cnierror.CodeIncompatibleVersion, `unsupported CNI result version "2.0.0"`},
		{"unknown default version", `{}`, "1.2.0", cnierror.CodeIncompatibleVersion, `unsupported CNI result version "1.2.0"`},
		{"invalid JSON", `{"cniVersion":"1.0.0",`, "", cnierror.CodeDecode, "decode CNI result"},
		{"not an object", `[1]`, "", cnierror.CodeDecode, "decode CNI result"},
		{"empty input", ``, "1.0.0", cnierror.CodeDecode, "decode CNI result"},
		{"bad CIDR in 1.x ips", `{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/33"}]}`, "", cnierror.CodeDecode, "ips[0]: address"},
		{"address without prefix length", `{"cniVersion":"1.0.0","ips":[{"address":"10.0.0.2"}]}`, "", cnierror.CodeDecode, "ips[0]: address"},
		{"missing address", `{"cniVersion":"1.0.0","ips":[{"gateway":"10.0.0.1"}]}`, "", cnierror.CodeDecode, "missing CIDR"},
		{"bad gateway in 0.4.0", `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/8","gateway":"10.0.0.300"}]}`, "", cnierror.CodeDecode, "ips[0]: gateway"},
		{"zoned gateway", `{"cniVersion":"1.0.0","ips":[{"address":"fe80::2/64","gateway":"fe80::1%eth0"}]}`, "", cnierror.CodeDecode, "zone"},
		{"bad route dst in 0.3.1", `{"cniVersion":"0.3.1","routes":[{"dst":"default"}]}`, "", cnierror.CodeDecode, "routes[0]: dst"},
		{"bad route gw in 1.0.0", `{"cniVersion":"1.0.0","routes":[{"dst":"0.0.0.0/0","gw":"x"}]}`, "", cnierror.CodeDecode, "routes[0]: gw"},
		{"bad ip4 in 0.2.0", `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0/8"}}`, "", cnierror.CodeDecode, "ip4: ip"},
		{"bad ip6 route in 0.1.0", `{"ip6":{"ip":"fd00::2/64","routes":[{"dst":"::/129"}]}}`, "", cnierror.CodeDecode, "ip6: routes[0]: dst"},
		{"wrong field type", `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mtu":"big"}]}`, "", cnierror.CodeDecode, "decode CNI 1.0.0 result"},
		{"non-string version", `{"cniVersion":1}`, "1.0.0", cnierror.CodeDecode, "decode CNI 1.0.0 result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.in), tt.def)
			assert.Nil(t, r)
			requireCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestConvertMatchesGoldenForEveryVersionPair(t *testing.T) {
	for _, from := range allVersions {
		for _, to := range allVersions {
			t.Run(from+"->"+to, func(t *testing.T) {
				in := sampleFor(from)
				r, err := Parse([]byte(in), "")
				require.NoError(t, err)
				before := r.Clone()

				out, err := r.Convert(to)
				require.NoError(t, err)
				assert.Equal(t, to, out.CNIVersion)
				fs, _ := shapeOf(from)
				ts, _ := shapeOf(to)
				assert.Equal(t, golden(converted[[2]shape{fs, ts}], to), encode(t, out))
				assert.Equal(t, before, r, "Convert changed its receiver")

				// The model says what the wire says: re-parsing the output gives it back.
				again, err := Parse([]byte(encode(t, out)), "")
				require.NoError(t, err)
				assert.Equal(t, out, again)
			})
		}
	}
}

func TestConvertDoesNotShareMemoryWithTheSource(t *testing.T) {
	r, err := Parse([]byte(sampleFor("1.1.0")), "")
	require.NoError(t, err)
	out, err := r.Convert("1.0.0")
	require.NoError(t, err)
	*out.IPs[0].Interface = 7
	*out.Routes[1].Table = 7
	out.Interfaces[0].Name = "changed"
	assert.Equal(t, 1, *r.IPs[0].Interface)
	assert.Equal(t, 0, *r.Routes[1].Table)
	assert.Equal(t, "br0", r.Interfaces[0].Name)
}

func TestConvertToEmptyVersionTargets010(t *testing.T) {
	r, err := Parse([]byte(sampleFor("0.4.0")), "")
	require.NoError(t, err)
	out, err := r.Convert("")
	require.NoError(t, err)
	assert.Equal(t, golden(converted[[2]shape{shape04, shape02}], "0.1.0"), encode(t, out))
}

func TestConvertDownDropsRoutesWithoutAnAddressOfTheirFamily(t *testing.T) {
	r, err := Parse([]byte(`{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.2/8"}],`+
		`"routes":[{"dst":"::/0","gw":"fd00::1"},{"dst":"0.0.0.0/0","gw":"10.0.0.1","mtu":1300}]}`), "")
	require.NoError(t, err)
	out, err := r.Convert("0.2.0")
	require.NoError(t, err)
	assert.Equal(t, `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/8","routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1"}]},"dns":{}}`, encode(t, out))
}

func TestConvertFails(t *testing.T) {
	tests := []struct {
		name, in, to string
		code         uint
		msg          string
	}{
		{"no valid IP addresses for 0.2.0", `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}`, "0.2.0",
			cnierror.CodeIncompatibleVersion, "cannot convert: no valid IP addresses"},
		{"no valid IP addresses for the empty target", `{"cniVersion":"0.4.0"}`, "",
			cnierror.CodeIncompatibleVersion, "cannot convert: no valid IP addresses"},
		{"target newer than 1.1.0", sampleFor("1.0.0"), "1.2.0",
			cnierror.CodeIncompatibleVersion, "no converter for CNI result version 1.0.0 to 1.2.0"},
		{"unknown target", sampleFor("0.2.0"), "0.5.0",
			cnierror.CodeIncompatibleVersion, "no converter for CNI result version 0.2.0 to 0.5.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse([]byte(tt.in), "")
			require.NoError(t, err)
			out, err := r.Convert(tt.to)
			assert.Nil(t, out)
			requireCode(t, err, tt.code, tt.msg)
		})
	}
}

func TestConvertFromAnUnknownVersionFails(t *testing.T) {
	_, err := (&Result{CNIVersion: "9.9.9"}).Convert("1.0.0")
	requireCode(t, err, cnierror.CodeIncompatibleVersion, "no converter for CNI result version 9.9.9 to 1.0.0")
}

func TestEncodeOmitsAndKeepsFieldsPerVersion(t *testing.T) {
	gw := netip.MustParseAddr("10.0.0.1")
	base := Result{
		Interfaces: []Interface{{Name: "eth0", MTU: 1500, SocketPath: "/s"}},
		IPs: []IPConfig{
			{Address: netip.MustParsePrefix("10.0.0.2/8"), Gateway: gw},
			{Address: netip.MustParsePrefix("10.0.0.3/8")},
		},
		Routes: []Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Table: ptr(0)}},
	}
	tests := []struct{ version, want string }{
		{"0.1.0", `{"cniVersion":"0.1.0","ip4":{"ip":"10.0.0.2/8","gateway":"10.0.0.1","routes":[{"dst":"0.0.0.0/0","table":0}]},"dns":{}}`},
		{"0.3.0", `{"cniVersion":"0.3.0","interfaces":[{"name":"eth0"}],` +
			`"ips":[{"version":"4","address":"10.0.0.2/8","gateway":"10.0.0.1"},{"version":"4","address":"10.0.0.3/8"}],` +
			`"routes":[{"dst":"0.0.0.0/0","table":0}],"dns":{}}`},
		{"1.1.0", `{"cniVersion":"1.1.0","interfaces":[{"mtu":1500,"name":"eth0","socketPath":"/s"}],` +
			`"ips":[{"address":"10.0.0.2/8","gateway":"10.0.0.1"},{"address":"10.0.0.3/8"}],"routes":[{"dst":"0.0.0.0/0","table":0}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			r := base
			r.CNIVersion = tt.version
			assert.Equal(t, tt.want, encode(t, &r))
		})
	}
}

func TestEncodeOfAnEmptyResultPerVersion(t *testing.T) {
	for _, v := range allVersions {
		sh, _ := shapeOf(v)
		want := `{"cniVersion":"` + v + `","dns":{}}`
		if sh == shape1 {
			want = `{"cniVersion":"` + v + `"}`
		}
		assert.Equal(t, want, encode(t, &Result{CNIVersion: v}), v)
	}
}

func TestEncodeRefusesUnknownVersionAndUnsetAddresses(t *testing.T) {
	tests := []struct {
		name string
		r    *Result
		code uint
		msg  string
	}{
		{"empty version", &Result{}, cnierror.CodeIncompatibleVersion, `unsupported CNI result version ""`},
		{"unknown version", &Result{CNIVersion: "1.2.0"}, cnierror.CodeIncompatibleVersion, `unsupported CNI result version "1.2.0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := json.Marshal(tt.r)
			requireCode(t, err, tt.code, tt.msg)
		})
	}
	for _, v := range []string{"0.2.0", "0.4.0", "1.0.0"} {
		_, err := json.Marshal(&Result{CNIVersion: v, IPs: []IPConfig{{Gateway: netip.MustParseAddr("10.0.0.1")}}})
		assert.ErrorContains(t, err, "CIDR is not set", v)
		_, err = json.Marshal(&Result{CNIVersion: v, IPs: []IPConfig{{Address: netip.MustParsePrefix("fd00::2/64")}},
			Routes: []Route{{GW: netip.MustParseAddr("fd00::1")}}})
		assert.ErrorContains(t, err, "CIDR is not set", v)
	}
}

func TestPrintIndentsWithFourSpacesAndEndsWithNewline(t *testing.T) {
	r := &Result{CNIVersion: "1.0.0", IPs: []IPConfig{{Address: netip.MustParsePrefix("10.0.0.2/8")}}}
	var buf bytes.Buffer
	require.NoError(t, r.Print(&buf))
	assert.Equal(t, "{\n    \"cniVersion\": \"1.0.0\",\n    \"ips\": [\n        {\n            \"address\": \"10.0.0.2/8\"\n        }\n    ]\n}\n", buf.String())
}

func TestPrintReportsEncodeErrors(t *testing.T) {
	var buf bytes.Buffer
	require.Error(t, (&Result{CNIVersion: "7"}).Print(&buf))
	assert.Empty(t, buf.String())
}

func TestUnmarshalJSONReadsAResultWithoutVersionAs010(t *testing.T) {
	var holder struct {
		Prev Result `json:"prevResult"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"prevResult":{"ip4":{"ip":"10.0.0.2/8"}}}`), &holder))
	assert.Equal(t, "0.1.0", holder.Prev.CNIVersion)
	assert.Equal(t, netip.MustParsePrefix("10.0.0.2/8"), holder.Prev.IPs[0].Address)

	err := json.Unmarshal([]byte(`{"prevResult":{"cniVersion":"3.0.0"}}`), &holder)
	requireCode(t, err, cnierror.CodeIncompatibleVersion, "unsupported CNI result version")
}

func TestCloneIsDeep(t *testing.T) {
	r, err := Parse([]byte(sampleFor("1.1.0")), "")
	require.NoError(t, err)
	r.DNS = DNS{Nameservers: []string{"a"}, Search: []string{"b"}, Options: []string{"c"}}
	c := r.Clone()
	require.Equal(t, r, c)

	c.Interfaces[0].MTU = 1
	*c.IPs[0].Interface = 5
	c.IPs[1].Address = netip.MustParsePrefix("1.1.1.1/32")
	*c.Routes[1].Table = 9
	*c.Routes[1].Scope = 9
	c.DNS.Nameservers[0], c.DNS.Search[0], c.DNS.Options[0] = "x", "x", "x"
	assert.Equal(t, 9000, r.Interfaces[0].MTU)
	assert.Equal(t, 1, *r.IPs[0].Interface)
	assert.Equal(t, "10.1.0.5/24", r.IPs[1].Address.String())
	assert.Equal(t, 0, *r.Routes[1].Table)
	assert.Equal(t, 0, *r.Routes[1].Scope)
	assert.Equal(t, DNS{Nameservers: []string{"a"}, Search: []string{"b"}, Options: []string{"c"}}, r.DNS)
	assert.Nil(t, (*Result)(nil).Clone())
}

func TestAddInterfaceReturnsItsIndex(t *testing.T) {
	r := &Result{CNIVersion: "1.0.0"}
	host := r.AddInterface(Interface{Name: "veth1"})
	ctr := r.AddInterface(Interface{Name: "eth0", Sandbox: "/ns"})
	assert.Equal(t, 0, host)
	assert.Equal(t, 1, ctr)
	r.IPs = append(r.IPs, IPConfig{Interface: &ctr, Address: netip.MustParsePrefix("10.0.0.2/8")})
	assert.True(t, strings.Contains(encode(t, r), `"interface":1`))
	assert.Equal(t, "eth0", r.Interfaces[*r.IPs[0].Interface].Name)
}

// The reference keeps a 0.4.0 entry's "version" as written, even when it is missing or
// contradicts the address (and then drops that address when converting to 0.2.0). The
// model has no such field: the version is always the address family's.
func TestEncodeDerivesIPVersionFromTheAddress(t *testing.T) {
	in := `{"cniVersion":"0.4.0","ips":[{"address":"10.0.0.2/8"},{"version":"4","address":"fd00::2/64"}]}`
	r, err := Parse([]byte(in), "")
	require.NoError(t, err)
	assert.Equal(t, `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.2/8"},{"version":"6","address":"fd00::2/64"}],"dns":{}}`, encode(t, r))

	down, err := r.Convert("0.2.0")
	require.NoError(t, err)
	assert.Equal(t, `{"cniVersion":"0.2.0","ip4":{"ip":"10.0.0.2/8"},"ip6":{"ip":"fd00::2/64"},"dns":{}}`, encode(t, down))
}

func TestUnmapReadsAnIPv4MappedPrefixAsIPv4AndLeavesOthersAlone(t *testing.T) {
	for in, want := range map[string]string{
		"::ffff:10.0.0.0/120": "10.0.0.0/24",
		"::ffff:10.0.0.5/128": "10.0.0.5/32",
		"::ffff:0.0.0.0/64":   "0.0.0.0/0", // fewer bits than the mapping prefix: all of IPv4
		"10.1.2.3/16":         "10.1.2.3/16",
		"fd00::1/64":          "fd00::1/64",
	} {
		assert.Equal(t, want, Unmap(netip.MustParsePrefix(in)).String(), in)
	}
	assert.False(t, Unmap(netip.Prefix{}).IsValid(), "an unset prefix stays unset")
}
