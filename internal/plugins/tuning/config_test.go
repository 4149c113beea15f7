package tuning

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

func request(config, cniArgs string) *skel.Request {
	return &skel.Request{
		Args:   skel.Args{ContainerID: "c1", IfName: "eth0.7", CNIArgs: cniArgs},
		Config: []byte(config),
		Net:    skel.NetConf{Type: "tuning"},
	}
}

func TestMacPrecedenceIsStaticThenCNIArgsThenCapabilityThenArgsCNI(t *testing.T) {
	static := `"mac":"0a:00:00:00:00:01"`
	runtime := `"runtimeConfig":{"mac":"0a:00:00:00:00:03"}`
	argsCNI := `"args":{"cni":{"mac":"0a:00:00:00:00:04"}}`
	tests := []struct {
		name, conf, cniArgs, want string
	}{
		{"static", "{" + static + "}", "", "0a:00:00:00:00:01"},
		{"CNI_ARGS over static", "{" + static + "}", "MAC=0a:00:00:00:00:02", "0a:00:00:00:00:02"},
		{"capability over CNI_ARGS", "{" + static + "," + runtime + "}", "MAC=0a:00:00:00:00:02", "0a:00:00:00:00:03"},
		{"args.cni over everything", "{" + static + "," + runtime + "," + argsCNI + "}", "MAC=0a:00:00:00:00:02", "0a:00:00:00:00:04"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := plan(request(tt.conf, tt.cniArgs))
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.Mac.String())
		})
	}
}

func TestArgsCNIOverridesAndMergesKeys(t *testing.T) {
	p, err := plan(request(`{"mtu":1400,"promisc":true,"sysctl":{"net.core.somaxconn":"100","net.ipv4.ping_group_range":"0 0"},
		"args":{"cni":{"mtu":1300,"promisc":false,"allmulti":true,"txQLen":0,"sysctl":{"net.core.somaxconn":"200"}}}}`, ""))
	require.NoError(t, err)
	assert.Equal(t, 1300, p.Mtu)
	assert.Equal(t, false, *p.Promisc)
	assert.Equal(t, true, *p.Allmulti)
	assert.Equal(t, 0, *p.TxQLen)
	assert.Equal(t, []Sysctl{
		{Key: "net.core.somaxconn", Name: "net/core/somaxconn", Value: "200"},
		{Key: "net.ipv4.ping_group_range", Name: "net/ipv4/ping_group_range", Value: "0 0"},
	}, p.Sysctls)
	assert.Equal(t, DefaultDataDir, p.DataDir)
}

func TestIfnameIsSubstitutedKeepingItsDots(t *testing.T) {
	p, err := plan(request(`{"sysctl":{"net.ipv4.conf.IFNAME.arp_ignore":"1","net/ipv6/conf/IFNAME/accept_ra":"0"}}`, ""))
	require.NoError(t, err)
	require.Len(t, p.Sysctls, 2)
	assert.Equal(t, "net/ipv4/conf/eth0.7/arp_ignore", p.Sysctls[0].Name)
	assert.Equal(t, "net/ipv6/conf/eth0.7/accept_ra", p.Sysctls[1].Name)
}

func TestSysctlPathEscapesAreRefusedNamingTheKey(t *testing.T) {
	for _, key := range []string{
		"net.ipv4/../../kernel/hostname",
		"net/ipv4/../../kernel/hostname",
		"/proc/sys/net/ipv4/ip_forward",
		"/net/ipv4/ip_forward",
		"../net/ipv4/ip_forward",
		"kernel.hostname",
		"net..ipv4.ip_forward",
		"net.ipv4.conf.IFNAME/../../../../kernel/x",
		"net",
		"vm.overcommit_memory",
	} {
		t.Run(key, func(t *testing.T) {
			_, err := plan(request(`{"sysctl":{"`+key+`":"1"}}`, ""))
			pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, `"`+key+`"`)
		})
	}
}

func TestInvalidLinkValuesAreRefusedNamingTheField(t *testing.T) {
	tests := []struct{ conf, field string }{
		{`{"mac":"nonsense"}`, "mac"},
		{`{"mac":"01:00:5e:00:00:01"}`, "mac"},
		{`{"args":{"cni":{"mac":"00:11:22:33:44:55:66:77"}}}`, "mac"},
		{`{"mtu":67}`, "mtu"},
		{`{"mtu":70000}`, "mtu"},
		{`{"txQLen":-1}`, "txQLen"},
		{`{"mtu":"big"}`, "mtu"},
	}
	for _, tt := range tests {
		t.Run(tt.conf, func(t *testing.T) {
			_, err := plan(request(tt.conf, ""))
			pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, tt.field)
		})
	}
}

func TestCNIArgsWithUnknownKeysAreRefused(t *testing.T) {
	_, err := plan(request(`{}`, "FOO=bar"))
	require.Error(t, err)
	_, err = plan(request(`{}`, "FOO=bar;IgnoreUnknown=1;MAC=0a:00:00:00:00:09"))
	require.NoError(t, err)
}

func TestSysctlValuesCompareAcrossWhitespace(t *testing.T) {
	assert.True(t, sameSysctl("0\t100", "0 100"))
	assert.True(t, sameSysctl("1", "1\n"))
	assert.False(t, sameSysctl("1", "10"))
}
