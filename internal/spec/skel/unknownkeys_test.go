package skel

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSpecKeysAreNetConfsKeys: the keys no plugin warns of are NetConf's, and specKey
// (the allocation-free switch) says so for each.
func TestSpecKeysAreNetConfsKeys(t *testing.T) {
	var tags []string
	for f := range reflect.TypeFor[NetConf]().Fields() {
		name, _ := jsonName(f)
		tags = append(tags, name)
		assert.True(t, specKey([]byte(name)), name)
	}
	assert.ElementsMatch(t, tags, knownKeys(reflect.TypeFor[struct{}](), ""), "the keys named to a top-level typo")
}

func TestMembersAndElementsWalkRawJSON(t *testing.T) {
	var keys, values []string
	members([]byte(` { "a" : 1 , "b\u0041":{"x":[1,"]}"]}, "c":[{"d":"e\"}"}], "f":null,"g":true}`), func(k, v []byte) {
		keys, values = append(keys, string(k)), append(values, string(v))
	})
	assert.Equal(t, []string{"a", "bA", "c", "f", "g"}, keys)
	assert.Equal(t, []string{"1", `{"x":[1,"]}"]}`, `[{"d":"e\"}"}]`, "null", "true"}, values)
	var elems []string
	elements([]byte(`[ {"a":1}, [2], "3" ]`), func(v []byte) { elems = append(elems, string(v)) })
	assert.Equal(t, []string{`{"a":1}`, "[2]", `"3"`}, elems)
	members([]byte(`[1]`), func(k, v []byte) { t.Errorf("not an object: %s", k) })
}

func TestNearestKeyIsAClosePlausibleTypo(t *testing.T) {
	known := []string{"isGateway", "isDefaultGateway", "bridge", "mtu", "ipMasq"}
	for key, want := range map[string]string{
		"isGatway": "isGateway", "isgateway": "isGateway", "brige": "bridge", "MTU": "mtu",
		"mtus": "mtu", "ipmasq": "ipMasq", "brdige": "bridge", "mdoe": "", "hairpin": "", "x": "", "completelyDifferent": "",
	} {
		assert.Equal(t, want, nearest(key, known), key)
	}
}

func TestUnknownKeysAreFoundAtEveryTypedLevel(t *testing.T) {
	type rng struct {
		Subnet string `json:"subnet"`
	}
	type inner struct {
		Type   string  `json:"type"`
		Ranges [][]rng `json:"ranges"`
	}
	type embedded struct {
		IPMasq bool `json:"ipMasq"`
	}
	type conf struct {
		embedded
		Bridge  string            `json:"bridge"`
		IPAM    *inner            `json:"ipam"`
		Sysctl  map[string]string `json:"sysctl"`
		Args    struct{ A int }   `json:"args"`
		Skipped string            `json:"-"`
	}
	data := []byte(`{"cniVersion":"1.0.0","name":"n","type":"bridge","ipMasq":true,"Bridge":"b","brige":"x",` +
		`"sysctl":{"any":"thing"},"args":{"cni":{"whatever":1}},"runtimeConfig":{"portMappings":[]},"Skipped":"s",` +
		`"ipam":{"type":"host-local","rangs":[],"ranges":[[{"subnet":"10.0.0.0/24","gatewy":"10.0.0.1"}]]}}`)
	var got []string
	report := func(path string, key []byte, known func() []string) {
		got = append(got, path+string(key)+"~"+nearest(string(key), known()))
	}
	walkObject(data, reflect.TypeFor[conf](), "", true, report)
	assert.Equal(t, []string{"brige~bridge", "Skipped~", "ipam.rangs~ranges", "ipam.ranges.gatewy~"}, got)

	got = nil
	walkObject(data, reflect.TypeFor[conf](), "", false, report)
	assert.Equal(t, []string{"ipam.rangs~ranges", "ipam.ranges.gatewy~"}, got, "a delegate owns only what its type declares below the top")

	got = nil
	walkObject([]byte(`{"ipam":{"type":"dhcp","typo":1}}`), reflect.TypeFor[struct {
		IPAM struct{} `json:"ipam"`
	}](), "", false, report)
	assert.Equal(t, []string{"ipam.typo~type"}, got, "ipam.type is the spec's, whoever decodes the rest")
}

func TestUnknownKeyWarningNamesPluginKeyAndSuggestion(t *testing.T) {
	assert.Equal(t, `bridge: unknown config key "isGatway" (did you mean "isGateway"?); ignored`,
		unknownKeyWarning("bridge", "", "isGatway", []string{"isGateway"}))
	assert.Equal(t, `host-local: unknown config key "ipam.rangs" (did you mean "ipam.ranges"?); ignored`,
		unknownKeyWarning("host-local", "ipam.", "rangs", []string{"ranges"}))
	assert.Equal(t, `bridge: unknown config key "zzz"; ignored`, unknownKeyWarning("bridge", "", "zzz", []string{"isGateway"}))
}

// A key matches its field whatever the letter case of its ASCII letters, as
// encoding/json matches it; nothing else is folded.
func TestEqualFoldIgnoresOnlyTheCaseOfASCIILetters(t *testing.T) {
	for _, c := range []struct {
		key, name string
		want      bool
	}{
		{"isGateway", "isGateway", true},
		{"ISGATEWAY", "isGateway", true},
		{"isgateway", "IsGateway", true},
		{"isGatewa", "isGateway", false},
		{"isGatewaY2", "isGateway1", false},
		{"a@", "a`", false}, // '@' and '`' differ by the case bit but are no letters
		{"ä", "Ä", false},   // bytes outside ASCII are compared as they are
		{"", "", true},
	} {
		assert.Equal(t, c.want, equalFold([]byte(c.key), c.name), "%q ~ %q", c.key, c.name)
	}
}
