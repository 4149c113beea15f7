package firewall

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/iptables/iptablestest"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/spec/skel/skeltest"
)

// loaded is what firewall's ADD has decided before it touches the firewall: the config,
// and from prevResult the bridge the ingress policy is keyed on and the addresses.
type loaded struct {
	Conf   *Config
	Bridge string
	IPs    []netip.Addr
}

func loadForAdd(req *skel.Request) (loaded, error) {
	conf, err := loadConfig(req)
	if err != nil {
		return loaded{}, err
	}
	if req.PrevResult == nil {
		return loaded{}, errNotChained
	}
	// The kernel's fallback for a prevResult without a host interface is left out:
	// nothing here reaches a namespace.
	var bridge string
	if conf.IngressPolicy != PolicyOpen {
		if bridge, err = listedBridge(req.PrevResult); err != nil {
			return loaded{}, err
		}
	}
	return loaded{Conf: conf, Bridge: bridge, IPs: req.PrevResult.Addrs()}, nil
}

const prev = `"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"cni0"},{"name":"veth1"},{"name":"eth0","sandbox":"/var/run/netns/c"}],` +
	`"ips":[{"address":"10.88.0.5/24","gateway":"10.88.0.1","interface":2},{"address":"fd00::5/64","interface":2}]}`

// FuzzLoad drives firewall configs and their prevResult through skel's ADD path and
// the plugin's loader. A refused config is a config error (never 999). For an accepted
// one, every iptables rule ADD would write (the admin jump, the per-address rules, the
// ingress policy's rules on the prevResult's bridge) reads back from iptables-save text
// as the same rule, the rules' comment gives the container back, and written back out
// the config loads to the same settings.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		`{"cniVersion":"1.1.0","name":"n","type":"firewall",` + prev + `}`,
		`{"cniVersion":"1.0.0","name":"n","type":"firewall","backend":"iptables","iptablesAdminChainName":"MY-ADMIN",` +
			`"ingressPolicy":"same-bridge",` + prev + `}`,
		`{"cniVersion":"0.4.0","name":"n","type":"firewall","backend":"firewalld","firewalldZone":"internal","ingressPolicy":"isolated",` +
			`"prevResult":{"cniVersion":"0.4.0","interfaces":[{"name":"br0"}],"ips":[{"version":"4","address":"10.1.0.5/24"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"firewall","ingressPolicy":"isolated",` +
			`"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"br0\n-F"}],"ips":[{"address":"10.1.0.5/24"}]}}`,
		`{"cniVersion":"1.1.0","name":"n","type":"firewall","iptablesAdminChainName":"CNI-FORWARD","backend":"nft",` + prev + `}`,
		`{"cniVersion":"1.1.0","name":"n","type":"firewall","firewalldZone":"a b"}`,
		`{"cniVersion":"0.3.1","name":"n","type":"firewall"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		l, ok := skeltest.Accepted(t, Plugin(), skeltest.AddArgs(""), config, loadForAdd)
		if !ok {
			return
		}
		att := attachmentOf(l.Req)
		v := l.Value
		for _, fam := range families {
			rules := append([]iptables.Rule{forwardRule(), adminRule(v.Conf.AdminChain)}, ipRules(att, fam, v.IPs)...)
			if v.Bridge != "" {
				for _, chain := range isolationRules(v.Conf.IngressPolicy, v.Bridge) {
					rules = append(rules, chain...)
				}
			}
			for _, r := range rules {
				iptablestest.RequireReadsBack(t, fam, filterTable, r)
			}
		}
		if cid, ok := parseComment(att.network, att.comment()); !ok || cid != att.containerID {
			t.Fatalf("comment %q gives back %q, %v", att.comment(), cid, ok)
		}
		conf, err := skel.LoadConfig[Config](l.Req)
		if err != nil {
			t.Fatal(err)
		}
		skeltest.RequireStable(t, Plugin(), l, conf, loadForAdd)
	})
}

// Found by FuzzLoad: the bridge name comes from another plugin's output and goes into
// iptables rules, so a newline in it would end the restore line (issue 13).
func TestBridgeNameFromPrevResultMustBeAnInterfaceName(t *testing.T) {
	for _, name := range []string{"br0\n-F", "br0\r", "a b", "x/y", "0123456789abcdef", "..", "br:0"} {
		prev := &result.Result{Interfaces: []result.Interface{{Name: name}}}
		_, err := listedBridge(prev)
		require.Error(t, err, "%q", name)
		assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%q", name)
		assert.Contains(t, err.Error(), "prevResult.interfaces[0].name", "%q", name)
	}
	got, err := listedBridge(&result.Result{Interfaces: []result.Interface{{Name: "br-0.1"}}})
	require.NoError(t, err)
	assert.Equal(t, "br-0.1", got)
}
