package flannel

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

const fullEnv = `FLANNEL_NETWORK=10.1.0.0/16
FLANNEL_SUBNET=10.1.17.1/24
FLANNEL_IPV6_NETWORK=fd10::/56
FLANNEL_IPV6_SUBNET=fd10:0:0:11::1/64
FLANNEL_MTU=1472
FLANNEL_IPMASQ=true
`

func TestParseSubnetEnv(t *testing.T) {
	env, err := ParseSubnetEnv([]byte(fullEnv))
	require.NoError(t, err)
	assert.Equal(t, "[10.1.0.0/16]", strings.ReplaceAll(toString(env.Networks), " ", ","))
	assert.Equal(t, "10.1.17.0/24", env.Subnet.String(), "the subnet is masked, as the reference's ParseCIDR does")
	assert.Equal(t, "fd10:0:0:11::/64", env.IPv6Subnet.String())
	assert.Equal(t, uint32(1472), *env.MTU)
	assert.True(t, *env.IPMasq)

	env, err = ParseSubnetEnv([]byte("# written by flanneld\nFLANNEL_NETWORK=10.1.0.0/16,10.2.0.0/16, 10.1.0.0/16\r\n" +
		"FLANNEL_SUBNET=10.1.17.1/24\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=yes\nOTHER=1\nnot an assignment\n"))
	require.NoError(t, err)
	assert.Equal(t, "[10.1.0.0/16 10.2.0.0/16]", toString(env.Networks), "several networks, duplicates dropped")
	assert.False(t, *env.IPMasq, `only "true" is true`)
}

func TestParseSubnetEnvNamesWhatIsMissing(t *testing.T) {
	for name, tc := range map[string]struct{ content, missing string }{
		"empty":               {"", "FLANNEL_NETWORK or FLANNEL_IPV6_NETWORK, FLANNEL_SUBNET or FLANNEL_IPV6_SUBNET, FLANNEL_MTU, FLANNEL_IPMASQ"},
		"no subnet":           {"FLANNEL_NETWORK=10.1.0.0/16\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n", "FLANNEL_SUBNET"},
		"no mtu, no masq":     {"FLANNEL_NETWORK=10.1.0.0/16\nFLANNEL_SUBNET=10.1.1.1/24\n", "FLANNEL_MTU, FLANNEL_IPMASQ"},
		"v6 without network":  {"FLANNEL_IPV6_SUBNET=fd00::/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n", "FLANNEL_IPV6_NETWORK"},
		"v4 fine, v6 partial": {"FLANNEL_NETWORK=10.1.0.0/16\nFLANNEL_SUBNET=10.1.1.1/24\nFLANNEL_IPV6_NETWORK=fd00::/48\nFLANNEL_MTU=1\nFLANNEL_IPMASQ=false\n", "FLANNEL_IPV6_SUBNET"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSubnetEnv([]byte(tc.content))
			require.Error(t, err)
			assert.Equal(t, "missing "+tc.missing, err.Error())
		})
	}
}

func TestParseSubnetEnvRefusesBadValues(t *testing.T) {
	for _, line := range []string{
		"FLANNEL_NETWORK=10.1.0.0", "FLANNEL_NETWORK=fd00::/48", "FLANNEL_SUBNET=10.1.1.1/33",
		"FLANNEL_IPV6_SUBNET=10.1.1.0/24", "FLANNEL_MTU=-1", "FLANNEL_MTU=70000", "FLANNEL_NETWORK=10.1.0.0/16,",
		"FLANNEL_IPV6_NETWORK=fe80::%eth0/64",
	} {
		_, err := ParseSubnetEnv([]byte(line + "\n" + fullEnv[strings.Index(fullEnv, "FLANNEL_MTU"):]))
		assert.Error(t, err, line)
	}
}

func toString(v any) string {
	b, _ := json.Marshal(v)
	return strings.NewReplacer(`"`, "", ",", " ").Replace(string(b))
}

func request(t testing.TB, config string) *skel.Request {
	t.Helper()
	var net skel.NetConf
	require.NoError(t, json.Unmarshal([]byte(config), &net))
	return &skel.Request{Config: []byte(config), Net: net}
}

// The delegate config, key for key, as the reference builds it from the same input.
func TestDelegateConfigIsTheReferences(t *testing.T) {
	env, err := ParseSubnetEnv([]byte(fullEnv))
	require.NoError(t, err)
	req := request(t, `{"cniVersion":"1.0.0","name":"cbr0","type":"flannel",
		"delegate":{"hairpinMode":true,"isDefaultGateway":true,"big":12345678901234567890},
		"ipam":{"dataDir":"/x","routes":[{"dst":"192.168.0.0/16","gw":"10.1.17.254"}]},
		"runtimeConfig":{"bandwidth":{"ingressRate":1000}}}`)
	c, err := load(req)
	require.NoError(t, err)
	d, err := delegateConfig(c, req.Net, env)
	require.NoError(t, err)
	got, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"big": 12345678901234567890,
		"cniVersion": "1.0.0",
		"hairpinMode": true,
		"ipMasq": false,
		"ipam": {
			"dataDir": "/x",
			"ranges": [[{"subnet": "10.1.17.0/24"}], [{"subnet": "fd10:0:0:11::/64"}]],
			"routes": [{"dst": "192.168.0.0/16", "gw": "10.1.17.254"}, {"dst": "10.1.0.0/16"}, {"dst": "fd10::/56"}],
			"type": "host-local"
		},
		"isDefaultGateway": true,
		"isGateway": true,
		"mtu": 1472,
		"name": "cbr0",
		"runtimeConfig": {"bandwidth": {"ingressRate": 1000}},
		"type": "bridge"
	}`, string(got))
	assert.Contains(t, string(got), "12345678901234567890", "large numbers pass unchanged")
}

func TestDelegateConfigKeepsWhatTheDelegateObjectSets(t *testing.T) {
	env, err := ParseSubnetEnv([]byte("FLANNEL_NETWORK=10.1.0.0/16\nFLANNEL_SUBNET=10.1.17.1/24\nFLANNEL_MTU=1472\nFLANNEL_IPMASQ=false\n"))
	require.NoError(t, err)
	req := request(t, `{"name":"n","type":"flannel","delegate":{"type":"ipvlan","master":"eth0","mtu":1400,"ipMasq":false}}`)
	c, err := load(req)
	require.NoError(t, err)
	d, err := delegateConfig(c, req.Net, env)
	require.NoError(t, err)
	got, _ := json.Marshal(d)
	assert.JSONEq(t, `{"type":"ipvlan","master":"eth0","mtu":1400,"ipMasq":false,"name":"n",
		"ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.17.0/24"}]],"routes":[{"dst":"10.1.0.0/16"}]}}`, string(got),
		"no cniVersion without one in the config, no isGateway for other types")
}

func TestBadConfigIsAnInvalidConfig(t *testing.T) {
	env, err := ParseSubnetEnv([]byte(fullEnv))
	require.NoError(t, err)
	for name, config := range map[string]string{
		"delegate name":      `{"name":"n","delegate":{"name":"x"}}`,
		"delegate ipam":      `{"name":"n","delegate":{"ipam":{}}}`,
		"delegate type":      `{"name":"n","delegate":{"type":7}}`,
		"delegate path":      `{"name":"n","delegate":{"type":"../bridge"}}`,
		"delegate not obj":   `{"name":"n","delegate":[]}`,
		"relative dataDir":   `{"name":"n","dataDir":"flannel"}`,
		"relative subnet":    `{"name":"n","subnetFile":"subnet.env"}`,
		"bad ipam route":     `{"name":"n","ipam":{"routes":[{"dst":"nope"}]}}`,
		"bad ipam route gw":  `{"name":"n","ipam":{"routes":[{"dst":"10.0.0.0/8","gw":"x"}]}}`,
		"routes not a list":  `{"name":"n","ipam":{"routes":{}}}`,
		"runtimeConfig list": `{"name":"n","runtimeConfig":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			req := request(t, config)
			c, err := load(req)
			if err == nil {
				_, err = delegateConfig(c, req.Net, env)
			}
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
		})
	}
	_, err = load(request(t, `{"name":"n","dataDir":7}`))
	require.Error(t, err)
	assert.Equal(t, "flannel: dataDir: must be a string, got a JSON number", err.Error(), "in the config's words")
}

// FuzzParseSubnetEnv: any content parses or fails cleanly, and what parses is complete.
func FuzzParseSubnetEnv(f *testing.F) {
	f.Add([]byte(fullEnv))
	f.Add([]byte("FLANNEL_IPV6_NETWORK=fd00::/48\nFLANNEL_IPV6_SUBNET=fd00:0:0:1::1/64\nFLANNEL_MTU=1450\nFLANNEL_IPMASQ=true\n"))
	f.Add([]byte("FLANNEL_NETWORK=10.0.0.0/8,10.0.0.0/8\nFLANNEL_SUBNET\n=\nFLANNEL_MTU=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		env, err := ParseSubnetEnv(data)
		if err != nil {
			return
		}
		if env.MTU == nil || env.IPMasq == nil || !env.Subnet.IsValid() && !env.IPv6Subnet.IsValid() {
			t.Fatalf("incomplete env accepted: %+v", env)
		}
		if env.Subnet.IsValid() && (!env.Subnet.Addr().Is4() || len(env.Networks) == 0) {
			t.Fatalf("bad IPv4 part accepted: %+v", env)
		}
	})
}

// FuzzDelegateConfig: any config loads and builds a delegate config or fails with a CNI
// error; what builds always names the network and a plugin type, and encodes.
func FuzzDelegateConfig(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"cbr0","type":"flannel","delegate":{"hairpinMode":true,"isDefaultGateway":true}}`))
	f.Add([]byte(`{"name":"n","subnetFile":"/run/x","dataDir":"/var/x","ipam":{"routes":[{"dst":"10.0.0.0/8"}]},"runtimeConfig":{"a":1}}`))
	f.Add([]byte(`{"name":"n","delegate":{"type":"macvlan","mtu":"x"}}`))
	env, err := ParseSubnetEnv([]byte(fullEnv))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &skel.Request{Config: data, Net: skel.NetConf{Name: "n"}}
		c, err := load(req)
		if err != nil {
			return
		}
		d, err := delegateConfig(c, req.Net, env)
		if err != nil {
			if cnierror.Code(err) != cnierror.CodeInvalidConfig {
				t.Fatalf("error without code 7: %v", err)
			}
			return
		}
		if _, err := delegateType(d); err != nil || d["name"] != "n" {
			t.Fatalf("bad delegate config: %v", d)
		}
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("delegate config does not encode: %v", err)
		}
	})
}

// A FIFO at the subnet file's path would block a plain open until a writer came,
// hanging ADD, STATUS and GC: it is refused at once, naming what is wrong.
func TestSubnetFileThatIsAFIFOIsAClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subnet.env")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	_, err := LoadSubnetEnv(path)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, "not a regular file")
}

// FuzzReadStored feeds arbitrary bytes to the reader of a stored delegate config, as
// found on disk: it never panics, and what it accepts is a JSON object naming a plugin
// type, so that DEL can always run it or knows it never can (errUnusable).
func FuzzReadStored(f *testing.F) {
	for _, seed := range []string{`{"type":"bridge","name":"cbr0","ipam":{"type":"host-local"}}`, `{"type":""}`,
		`{"type":"a/b"}`, `[]`, `null`, `{"type":7}`, "\x00", `{"type":"bridge"} trailing`} {
		f.Add([]byte(seed))
	}
	path := filepath.Join(f.TempDir(), "ctr")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		raw, conf, err := readStored(path)
		if err != nil {
			if !errors.Is(err, errUnusable) {
				t.Fatalf("%q: neither read nor unusable: %v", data, err)
			}
			return
		}
		if typ, terr := delegateType(conf); terr != nil || typ == "" || !bytes.Equal(raw, data) {
			t.Fatalf("%q accepted as %v (%v)", data, conf, terr)
		}
	})
}
