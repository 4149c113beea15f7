package firewall

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/spec/skel"
)

// The backends.
const (
	BackendIPTables  = "iptables"
	BackendNFTables  = "nftables"
	BackendFirewalld = "firewalld"
)

// The ingress policies.
const (
	PolicyOpen       = "open"
	PolicySameBridge = "same-bridge"
	PolicyIsolated   = "isolated"
)

// Defaults of the reference plugin.
const (
	DefaultAdminChain = "CNI-ADMIN"
	DefaultZone       = "trusted"
)

// Config is the plugin's part of the network config.
type Config struct {
	Backend       string `json:"backend,omitempty"`
	AdminChain    string `json:"iptablesAdminChainName,omitempty"`
	Zone          string `json:"firewalldZone,omitempty"`
	IngressPolicy string `json:"ingressPolicy,omitempty"`
}

// loadConfig parses the config once and fills in the defaults; Backend stays "" when
// unset, so that the (D-Bus) detection runs only when it is needed.
func loadConfig(req *skel.Request) (*Config, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	conf.AdminChain = cmp.Or(conf.AdminChain, DefaultAdminChain)
	conf.Zone = cmp.Or(conf.Zone, DefaultZone)
	conf.IngressPolicy = cmp.Or(conf.IngressPolicy, PolicyOpen)
	return conf, conf.validate()
}

func (c *Config) validate() error {
	if !slices.Contains([]string{"", BackendIPTables, BackendNFTables, BackendFirewalld}, c.Backend) {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "backend: must be %q, %q or %q, got %q",
			BackendIPTables, BackendNFTables, BackendFirewalld, c.Backend)
	}
	if err := validChainName(c.AdminChain); err != nil {
		return err
	}
	if !slices.Contains([]string{PolicyOpen, PolicySameBridge, PolicyIsolated}, c.IngressPolicy) {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "ingressPolicy: must be %q, %q or %q, got %q",
			PolicyOpen, PolicySameBridge, PolicyIsolated, c.IngressPolicy)
	}
	if strings.ContainsAny(c.Zone, " \t\n/") {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "firewalldZone: %q is not a zone name", c.Zone)
	}
	return nil
}

// validChainName refuses names iptables would reject, and the chains the plugin itself
// manages in either backend: the admin chain is the operator's, so a config must not
// make the plugin jump from CNI-FORWARD into CNI-FORWARD, into a built-in chain, or
// into a chain of its nftables table.
func validChainName(name string) error {
	if err := iptables.CheckChainName(name); err != nil {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "iptablesAdminChainName: %v", err)
	}
	switch name {
	case forwardChain, "INPUT", "OUTPUT", "PREROUTING", "POSTROUTING", privChain, stage1Chain, stage2Chain,
		"ACCEPT", "DROP", "RETURN", "REJECT", "QUEUE", nftForwardChain, nftIsolationChain:
		return cnierror.Newf(cnierror.CodeInvalidConfig, "iptablesAdminChainName: %q is reserved", name)
	}
	return nil
}
