package portmap

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/iptables"
	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/result"
)

// defaultMarkBit is the reference's mark bit (0x2000); operators' rules and nodes
// upgraded from the reference expect it.
const defaultMarkBit = 13

// Config is portmap's network configuration.
type Config struct {
	Backend              string    `json:"backend,omitempty"`
	SNAT                 *bool     `json:"snat,omitempty"`
	MasqAll              bool      `json:"masqAll,omitempty"`
	MarkMasqBit          *int      `json:"markMasqBit,omitempty"`
	ExternalSetMarkChain *string   `json:"externalSetMarkChain,omitempty"`
	ConditionsV4         *[]string `json:"conditionsV4,omitempty"`
	ConditionsV6         *[]string `json:"conditionsV6,omitempty"`
	RuntimeConfig        struct {
		PortMappings []PortMapping `json:"portMappings,omitempty"`
	} `json:"runtimeConfig,omitempty"`
}

// PortMapping is one entry of runtimeConfig.portMappings.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// mapping is a validated PortMapping.
type mapping struct {
	proto         string // "tcp", "udp" or "sctp"
	hostPort      uint16
	containerPort uint16
	// hostIP is the only local address the mapping answers on; invalid means any.
	hostIP netip.Addr
	// v6 tells the family of a given hostIP; meaningless when hostIP is invalid.
	v6 bool
	// anyFamily is true when no hostIP (or an empty one) was given: the mapping
	// exists in both families.
	anyFamily bool
}

// inFamily reports whether m applies to the v4 (v6=false) or v6 family. A hostIP of
// the other family skips the mapping there; "0.0.0.0" and "::" mean any address of
// their own family only, as in the reference.
func (m mapping) inFamily(v6 bool) bool { return m.anyFamily || m.v6 == v6 }

// settings is the validated configuration of one attachment.
type settings struct {
	backend     netfilter.Backend
	snat        bool
	masqAll     bool
	markBit     int
	externalSet string
	cond4       []string
	cond6       []string
	mappings    []mapping
}

// protocols are the supported protocols with their IP protocol numbers: a slice, which
// the linker lays out as data, where a map literal would be code run before main in
// every exec of the binary.
var protocols = []struct {
	name   string
	number uint8
}{{"tcp", 6}, {"udp", 17}, {"sctp", 132}}

// protoNumber is the IP protocol number of a supported protocol, 0 for any other.
func protoNumber(name string) uint8 {
	for _, p := range protocols {
		if p.name == name {
			return p.number
		}
	}
	return 0
}

// parseSettings validates the configuration; every failure is code 7 naming the field.
func parseSettings(conf *Config) (*settings, error) {
	s := &settings{snat: true, markBit: defaultMarkBit, masqAll: conf.MasqAll}
	if conf.SNAT != nil {
		s.snat = *conf.SNAT
	}
	for i, pm := range conf.RuntimeConfig.PortMappings {
		m, err := parseMapping(i, pm)
		if err != nil {
			return nil, err
		}
		s.mappings = append(s.mappings, m)
	}
	if conf.MarkMasqBit != nil && conf.ExternalSetMarkChain != nil {
		return nil, cnierror.Invalid("markMasqBit: cannot be combined with externalSetMarkChain")
	}
	if conf.MarkMasqBit != nil {
		if *conf.MarkMasqBit < 0 || *conf.MarkMasqBit > 31 {
			return nil, cnierror.Invalid("markMasqBit: must be 0-31, got %d", *conf.MarkMasqBit)
		}
		s.markBit = *conf.MarkMasqBit
	}
	if conf.ExternalSetMarkChain != nil {
		if err := iptables.CheckChainName(*conf.ExternalSetMarkChain); err != nil {
			return nil, cnierror.Invalid("externalSetMarkChain: %v", err)
		}
		s.externalSet = *conf.ExternalSetMarkChain
	}
	var err error
	if s.cond4, err = conditions("conditionsV4", conf.ConditionsV4); err != nil {
		return nil, err
	}
	if s.cond6, err = conditions("conditionsV6", conf.ConditionsV6); err != nil {
		return nil, err
	}
	if s.backend, err = chooseBackend(conf); err != nil {
		return nil, err
	}
	return s, s.checkBackendOptions(conf)
}

// conditions returns a condition list, refusing elements with a control character in
// either syntax: one element is one argument (iptables) or one expression (nft), and a
// newline in it would end the line of the restore script it is written into.
func conditions(field string, conds *[]string) ([]string, error) {
	if conds == nil {
		return nil, nil
	}
	for i, c := range *conds {
		if err := iptables.CheckArg(c); err != nil {
			return nil, cnierror.Invalid("%s[%d]: %v", field, i, err)
		}
	}
	return *conds, nil
}

// chooseBackend resolves "backend". Unset, it is the node-wide choice bridge and ptp
// masquerade make too, except that options only one backend understands (a mark bit,
// an external mark chain, conditions in one syntax) pick that backend, as the
// reference documentation promises.
func chooseBackend(conf *Config) (netfilter.Backend, error) {
	if conf.Backend == "" || conf.Backend == "auto" {
		switch {
		case conf.MarkMasqBit != nil || conf.ExternalSetMarkChain != nil:
			return netfilter.Runnable(netfilter.IPTables), nil
		case conditionSyntax(conf.ConditionsV4) == netfilter.IPTables || conditionSyntax(conf.ConditionsV6) == netfilter.IPTables:
			return netfilter.Runnable(netfilter.IPTables), nil
		case conditionSyntax(conf.ConditionsV4) == netfilter.NFTables || conditionSyntax(conf.ConditionsV6) == netfilter.NFTables:
			return netfilter.NFTables, nil
		}
	}
	return netfilter.Choose("backend", conf.Backend)
}

// conditionSyntax tells which backend's syntax a condition list is written in: iptables
// arguments start with "-" or "!", anything else is nft. "" for an empty list.
func conditionSyntax(conds *[]string) netfilter.Backend {
	if conds == nil || len(*conds) == 0 {
		return ""
	}
	first := strings.TrimSpace((*conds)[0])
	if strings.HasPrefix(first, "-") || strings.HasPrefix(first, "!") {
		return netfilter.IPTables
	}
	return netfilter.NFTables
}

// checkBackendOptions rejects options the chosen backend cannot honour. Options only
// iptables has, where the iptables tools are not installed (netfilter.Runnable chose
// nftables), say so.
func (s *settings) checkBackendOptions(conf *Config) error {
	missing := ""
	if !netfilter.IPTablesInstalled() {
		missing = ", and the iptables tools are not installed"
	}
	if s.backend == netfilter.NFTables {
		if conf.MarkMasqBit != nil {
			return cnierror.Invalid("markMasqBit: only supported with backend \"iptables\"%s", missing)
		}
		if conf.ExternalSetMarkChain != nil {
			return cnierror.Invalid("externalSetMarkChain: only supported with backend \"iptables\"%s", missing)
		}
	}
	for field, conds := range map[string]*[]string{"conditionsV4": conf.ConditionsV4, "conditionsV6": conf.ConditionsV6} {
		if syn := conditionSyntax(conds); syn != "" && syn != s.backend {
			return cnierror.Invalid("%s: conditions are in %s syntax but the backend is %s%s", field, syn, s.backend, missing)
		}
	}
	if s.backend == netfilter.NFTables {
		for _, fc := range []struct {
			field string
			conds []string
			v6    bool
		}{{"conditionsV4", s.cond4, false}, {"conditionsV6", s.cond6, true}} {
			if err := checkNFTConditions(fc.field, fc.conds); err != nil {
				return err
			}
			if err := requireNFTFor(fc.field, fc.conds, fc.v6); err != nil {
				return err
			}
		}
	}
	return nil
}

func parseMapping(i int, pm PortMapping) (mapping, error) {
	field := fmt.Sprintf("runtimeConfig.portMappings[%d]", i)
	m := mapping{proto: strings.ToLower(pm.Protocol)}
	if protoNumber(m.proto) == 0 {
		return m, cnierror.Invalid("%s.protocol: must be tcp, udp or sctp, got %q", field, pm.Protocol)
	}
	if pm.HostPort < 1 || pm.HostPort > 65535 {
		return m, cnierror.Invalid("%s.hostPort: must be 1-65535, got %d", field, pm.HostPort)
	}
	if pm.ContainerPort < 1 || pm.ContainerPort > 65535 {
		return m, cnierror.Invalid("%s.containerPort: must be 1-65535, got %d", field, pm.ContainerPort)
	}
	m.hostPort, m.containerPort = uint16(pm.HostPort), uint16(pm.ContainerPort)
	if pm.HostIP == "" {
		m.anyFamily = true
		return m, nil
	}
	ip, err := netip.ParseAddr(pm.HostIP)
	if err != nil || ip.Zone() != "" {
		return m, cnierror.Invalid("%s.hostIP: invalid IP address %q", field, pm.HostIP)
	}
	ip = ip.Unmap()
	m.v6 = ip.Is6()
	if !ip.IsUnspecified() {
		m.hostIP = ip
	}
	return m, nil
}

// firstAddrs returns the first IPv4 and the first IPv6 address of ips, the two the
// reference maps ports to (link.ContainerIPs orders them so that these are its picks).
func firstAddrs(ips []result.IPConfig) (v4, v6 netip.Prefix) {
	for _, ip := range ips {
		switch a := ip.Address.Addr(); {
		case a.Is4() && !v4.IsValid():
			v4 = ip.Address
		case a.Is6() && !a.Is4In6() && !v6.IsValid():
			v6 = ip.Address
		}
	}
	return v4, v6
}
