package result

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WireRoute and WireDNS are also the config's ipam.routes and dns, flannel's delegate
// routes and the invocation log's: each must write the reference's keys in its order
// and read back what it wrote.
func TestWireRouteAndDNSWriteTheReferenceKeysInItsOrderAndReadThemBack(t *testing.T) {
	table, scope := 100, 253
	rt := WireRoute{Dst: "10.0.0.0/8", GW: "10.0.0.1", MTU: 1400, AdvMSS: 1360, Priority: 5, Table: &table, Scope: &scope}
	b, err := json.Marshal(rt)
	require.NoError(t, err)
	assert.Equal(t, `{"dst":"10.0.0.0/8","gw":"10.0.0.1","mtu":1400,"advmss":1360,"priority":5,"table":100,"scope":253}`, string(b))
	var back WireRoute
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rt, back)
	b, err = json.Marshal(WireRoute{Dst: "::/0"})
	require.NoError(t, err)
	assert.Equal(t, `{"dst":"::/0"}`, string(b), "every field but dst is omitted when unset")

	dns := WireDNS{Nameservers: []string{"10.0.0.2"}, Domain: "example.org", Search: []string{"a.example.org"}, Options: []string{"ndots:2"}}
	b, err = json.Marshal(dns)
	require.NoError(t, err)
	assert.Equal(t, `{"nameservers":["10.0.0.2"],"domain":"example.org","search":["a.example.org"],"options":["ndots:2"]}`, string(b))
	var dnsBack WireDNS
	require.NoError(t, json.Unmarshal(b, &dnsBack))
	assert.Equal(t, dns, dnsBack)
	b, err = json.Marshal(WireDNS{})
	require.NoError(t, err)
	assert.Equal(t, `{}`, string(b))
}

func TestWireDNSResultIsTheModelAndNilIsNoDNS(t *testing.T) {
	d := &WireDNS{Nameservers: []string{"10.0.0.2"}, Domain: "example.org", Search: []string{"s"}, Options: []string{"o"}}
	assert.Equal(t, DNS{Nameservers: []string{"10.0.0.2"}, Domain: "example.org", Search: []string{"s"}, Options: []string{"o"}}, d.Result())
	var none *WireDNS
	assert.True(t, none.Result().IsEmpty())
}

// A 1.x result writes its routes in alphabetical key order: sorted and unsorted must
// carry every field across.
func TestWireRouteSortedAndUnsortedKeepEveryField(t *testing.T) {
	table, scope := 7, 0
	rt := WireRoute{Dst: "10.1.0.0/16", GW: "10.0.0.1", MTU: 9000, AdvMSS: 8960, Priority: 3, Table: &table, Scope: &scope}
	assert.Equal(t, rt, rt.sorted().unsorted())
	b, err := json.Marshal(rt.sorted())
	require.NoError(t, err)
	assert.Equal(t, `{"advmss":8960,"dst":"10.1.0.0/16","gw":"10.0.0.1","mtu":9000,"priority":3,"scope":0,"table":7}`, string(b))
}

// A prevResult is accepted only in its config's wire family, as the reference checks:
// 0.1.0-0.2.0, 0.3.0-0.4.0, 1.x; an unknown version shares no family.
func TestSameShapeGroupsTheVersionsOfOneWireFamily(t *testing.T) {
	families := [][]string{{"0.1.0", "0.2.0"}, {"0.3.0", "0.3.1", "0.4.0"}, {"1.0.0", "1.1.0"}}
	for i, fa := range families {
		for j, fb := range families {
			for _, a := range fa {
				for _, b := range fb {
					assert.Equal(t, i == j, SameShape(a, b), "%s and %s", a, b)
				}
			}
		}
	}
	assert.False(t, SameShape("1.2.0", "1.1.0"))
	assert.False(t, SameShape("", ""))
}
