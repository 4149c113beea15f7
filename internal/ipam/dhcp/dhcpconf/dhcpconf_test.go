package dhcpconf_test

import (
	"strings"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/ipam/dhcp/dhcpconf"
	"github.com/cnikit/cni/internal/spec/skel"
)

func TestParseResolvesProvideAndRequest(t *testing.T) {
	c, err := dhcpconf.Parse([]byte(`{"name":"lan","ipam":{"type":"dhcp","daemonSocketPath":"/run/x.sock","priority":7,
		"provide":[{"option":"host-name","fromArg":"K8S_POD_NAME"},{"option":"60","value":"cni"}],
		"request":[{"option":"ntp-servers"},{"option":42}]}}`), "IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=x")
	require.NoError(t, err)
	assert.Equal(t, "lan", c.Network)
	assert.Equal(t, "/run/x.sock", c.SocketPath)
	assert.Equal(t, 7, c.Priority)
	require.Len(t, c.Provide, 2)
	assert.Equal(t, uint8(12), c.Provide[0].Code.Code())
	assert.Equal(t, []byte("web-0"), c.Provide[0].Value.ToBytes())
	assert.Equal(t, uint8(60), c.Provide[1].Code.Code())
	codes := codesOf(c.Request)
	assert.Equal(t, []uint8{42, 1, 3, 6, 15, 33, 121}, codes, "asked-for options first, then the defaults")
}

func TestSkipDefaultAsksOnlyForTheListedOptions(t *testing.T) {
	c, err := dhcpconf.Parse([]byte(`{"name":"lan","ipam":{"request":[{"skipDefault":true},{"option":"routers"}]}}`), "")
	require.NoError(t, err)
	assert.Equal(t, []uint8{3}, codesOf(c.Request))
	assert.Equal(t, dhcpconf.DefaultSocketPath, c.SocketPath)
}

// The daemon's GC reads the valid list by skel's rule, so an empty
// "cni.dev/valid-attachments" beside a non-empty legacy list keeps the legacy list, as
// the plugin side does, instead of releasing every lease of the network.
func TestGCWithAnEmptyValidListKeepsTheLegacyList(t *testing.T) {
	c, err := dhcpconf.Parse([]byte(`{"name":"lan","ipam":{},"cni.dev/valid-attachments":[],
		"cni.dev/attachments":[{"containerID":"a","ifname":"eth0"}]}`), "")
	require.NoError(t, err)
	assert.Equal(t, []skel.Attachment{{ContainerID: "a", IfName: "eth0"}}, c.Valid)
}

func TestParseRefusesBadOptions(t *testing.T) {
	for name, conf := range map[string]string{
		"unknown name":   `{"name":"n","ipam":{"request":[{"option":"no-such-option"}]}}`,
		"out of range":   `{"name":"n","ipam":{"provide":[{"option":"300","value":"x"}]}}`,
		"pad":            `{"name":"n","ipam":{"provide":[{"option":0,"value":"x"}]}}`,
		"too long":       `{"name":"n","ipam":{"provide":[{"option":"host-name","value":"` + strings.Repeat("a", 256) + `"}]}}`,
		"no ipam":        `{"name":"n"}`,
		"bad priority":   `{"name":"n","ipam":{"priority":-1}}`,
		"wrong type":     `{"name":"n","ipam":{"provide":"host-name"}}`,
		"option as bool": `{"name":"n","ipam":{"request":[{"option":true}]}}`,
	} {
		_, err := dhcpconf.Parse([]byte(conf), "")
		require.Error(t, err, name)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%s: %v", name, err)
	}
}

func TestParseNamesAWronglyTypedKeyInTheConfigsWords(t *testing.T) {
	_, err := dhcpconf.Parse([]byte(`{"name":"n","ipam":{"daemonSocketPath":1}}`), "")
	require.Error(t, err)
	assert.Equal(t, "dhcp: ipam.daemonSocketPath: must be a string, got a JSON number", err.Error())
	_, err = dhcpconf.NetworkName([]byte(`{"name":["n"]}`))
	require.Error(t, err)
	assert.Equal(t, "dhcp: name: must be a string, got a JSON array", err.Error())
}

func TestClientIDIsTheReferencesAndFitsAnOption(t *testing.T) {
	assert.Equal(t, "abc/net/eth0", dhcpconf.ClientID("abc", "net", "eth0"))
	long := dhcpconf.ClientID(strings.Repeat("c", 300), "net", "eth0")
	assert.Len(t, long, 254)
}

func codesOf(list []dhcpv4.OptionCode) []uint8 {
	var out []uint8
	for _, c := range list {
		out = append(out, c.Code())
	}
	return out
}

// FuzzParse: any config either parses into options a DHCP message can carry or is
// refused with code 7; it never panics.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"lan","type":"macvlan","master":"eth0","ipam":{"type":"dhcp"}}`), "")
	f.Add([]byte(`{"name":"lan","ipam":{"type":"dhcp","daemonSocketPath":"/run/cni/dhcp.sock","request":[{"skipDefault":true,"option":"classless-static-routes"}],"provide":[{"option":"host-name","fromArg":"K8S_POD_NAME"}],"priority":100}}`), "K8S_POD_NAME=a;IgnoreUnknown=1")
	f.Add([]byte(`{"name":"lan","ipam":{},"cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}`), "")
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"lan","ipam":{"type":"dhcp"},"prevResult":{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"address":"10.0.0.5/24","interface":0}]}}`), "")
	f.Fuzz(func(t *testing.T, data []byte, args string) {
		c, err := dhcpconf.Parse(data, args)
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidConfig {
				t.Fatalf("error without code 7: %v", err)
			}
			return
		}
		for _, o := range c.Provide {
			if n := len(o.Value.ToBytes()); n > 255 {
				t.Fatalf("option %d carries %d bytes", o.Code.Code(), n)
			}
			if code := o.Code.Code(); code == 0 || code == 255 {
				t.Fatalf("provides option %d", code)
			}
		}
		_, _ = dhcpconf.NetworkName(data)
		if a, ok := dhcpconf.PrevIPv4(data, "eth0"); ok && !a.Is4() {
			t.Fatalf("PrevIPv4 gave %s", a)
		}
	})
}

func TestPrevIPv4FindsTheAttachmentsAddress(t *testing.T) {
	for name, c := range map[string]struct {
		prev string
		want string
	}{
		"the sandbox interface's": {`{"cniVersion":"1.0.0","interfaces":[{"name":"br0"},{"name":"eth0","sandbox":"/run/netns/x"}],` +
			`"ips":[{"address":"10.1.0.1/24","interface":0},{"address":"fd00::5/64","interface":1},{"address":"10.99.0.77/24","interface":1}]}`, "10.99.0.77"},
		"else the first IPv4":   {`{"cniVersion":"1.0.0","ips":[{"address":"fd00::5/64"},{"address":"10.99.0.60/24"},{"address":"10.99.0.61/24"}]}`, "10.99.0.60"},
		"a 0.2.0 result":        {`{"cniVersion":"0.2.0","ip4":{"ip":"10.99.0.62/24"}}`, "10.99.0.62"},
		"IPv6 only":             {`{"cniVersion":"1.0.0","ips":[{"address":"fd00::5/64"}]}`, ""},
		"an index out of range": {`{"cniVersion":"1.0.0","interfaces":[],"ips":[{"address":"10.99.0.63/24","interface":4}]}`, "10.99.0.63"},
		"garbage":               {`{"ips":"x"}`, ""},
		"none":                  {``, ""},
	} {
		conf := `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"dhcp"}}`
		if c.prev != "" {
			conf = `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"dhcp"},"prevResult":` + c.prev + `}`
		}
		a, ok := dhcpconf.PrevIPv4([]byte(conf), "eth0")
		if c.want == "" {
			assert.False(t, ok, "%s: %s", name, a)
			continue
		}
		assert.Equal(t, c.want, a.String(), name)
	}
}

func TestFamiliesAreIPv4AloneUnlessIPv6IsAsked(t *testing.T) {
	for ipam, want := range map[string][2]bool{
		`{}`:                          {true, false},
		`{"ipv6":true}`:               {true, true},
		`{"ipv4":false,"ipv6":true}`:  {false, true},
		`{"ipv4":true,"ipv6":false}`:  {true, false},
		`{"ipv4":null,"ipv6":true}`:   {true, true},
		`{"ipv6":false,"ipv4":false}`: {false, false},
	} {
		c, err := dhcpconf.Parse([]byte(`{"name":"n","ipam":`+ipam+`}`), "")
		if want == [2]bool{} {
			require.Error(t, err, ipam)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
			assert.ErrorContains(t, err, "ipam.ipv4")
			continue
		}
		require.NoError(t, err, ipam)
		assert.Equal(t, want, [2]bool{c.IPv4, c.IPv6}, ipam)
	}
}

func TestRoutesAreReadAndABadOneNamed(t *testing.T) {
	c, err := dhcpconf.Parse([]byte(`{"name":"n","ipam":{"ipv6":true,"routes":[{"dst":"::/0","gw":"fe80::1"},{"dst":"fd99::/64"}]}}`), "")
	require.NoError(t, err)
	require.Len(t, c.Routes, 2)
	assert.Equal(t, "::/0", c.Routes[0].Dst.String())
	assert.Equal(t, "fe80::1", c.Routes[0].GW.String())
	for routes, field := range map[string]string{
		`[{"dst":"x"}]`: "ipam.routes[0].dst",
		`[{"dst":"::/0"},{"dst":"::/0","gw":"y"}]`: "ipam.routes[1].gw",
	} {
		_, err := dhcpconf.Parse([]byte(`{"name":"n","ipam":{"routes":`+routes+`}}`), "")
		require.Error(t, err)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
		assert.ErrorContains(t, err, field)
	}
}
