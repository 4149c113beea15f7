package tuning

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/spec/skel"
)

// DefaultDataDir is where the original values are kept between ADD and DEL.
const DefaultDataDir = "/run/cni/tuning"

// Config is the plugin's part of the network config.
type Config struct {
	DataDir string `json:"dataDir,omitempty"`
	Settings
	RuntimeConfig struct {
		Mac string `json:"mac,omitempty"`
	} `json:"runtimeConfig,omitempty"`
	Args struct {
		CNI *Settings `json:"cni,omitempty"`
	} `json:"args,omitempty"`
}

// Settings are the tunable keys, statically or in "args.cni". Pointers tell "absent"
// from a zero value, so args.cni can override a static value with false or 0.
type Settings struct {
	SysCtl   map[string]string `json:"sysctl,omitempty"`
	Mac      *string           `json:"mac,omitempty"`
	Promisc  *bool             `json:"promisc,omitempty"`
	Mtu      *int              `json:"mtu,omitempty"`
	Allmulti *bool             `json:"allmulti,omitempty"`
	TxQLen   *int              `json:"txQLen,omitempty"`
}

// Sysctl is one requested sysctl: Key as configured (what the allow-list matches),
// Name its validated slash form under /proc/sys.
type Sysctl struct {
	Key   string
	Name  string
	Value string
}

// Plan is what the plugin does to the container interface, validated: its sysctls and
// the link attributes to set (a false Promisc or Allmulti turns the flag off).
type Plan struct {
	DataDir string
	Sysctls []Sysctl
	linkState
}

// plan resolves the settings in the reference's order of precedence (static, then
// CNI_ARGS MAC, then the "mac" capability, then args.cni) and validates them.
func plan(req *skel.Request) (*Plan, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	s := conf.Settings
	s.SysCtl = make(map[string]string, len(conf.SysCtl))
	maps.Copy(s.SysCtl, conf.SysCtl)
	cniArgs, err := skel.ParseCNIArgs(req.Args.CNIArgs, "MAC")
	if err != nil {
		return nil, err
	}
	if mac := cniArgs["MAC"]; mac != "" {
		s.Mac = &mac
	}
	if mac := conf.RuntimeConfig.Mac; mac != "" {
		s.Mac = &mac
	}
	if a := conf.Args.CNI; a != nil {
		maps.Copy(s.SysCtl, a.SysCtl)
		override(&s.Mac, a.Mac)
		override(&s.Promisc, a.Promisc)
		override(&s.Mtu, a.Mtu)
		override(&s.Allmulti, a.Allmulti)
		override(&s.TxQLen, a.TxQLen)
	}
	p := &Plan{DataDir: cmp.Or(conf.DataDir, DefaultDataDir),
		linkState: linkState{Promisc: s.Promisc, Allmulti: s.Allmulti, TxQLen: s.TxQLen}}
	if err := p.setLinkValues(s); err != nil {
		return nil, err
	}
	p.Sysctls, err = sysctls(s.SysCtl, req.Args.IfName)
	return p, err
}

func override[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

func (p *Plan) setLinkValues(s Settings) error {
	if s.Mac != nil {
		mac, err := net.ParseMAC(*s.Mac)
		switch {
		case err != nil:
			return cnierror.Newf(cnierror.CodeInvalidConfig, "mac: %q is not a MAC address", *s.Mac)
		case len(mac) != 6:
			return cnierror.Newf(cnierror.CodeInvalidConfig, "mac: %q is not a 6-byte Ethernet address", *s.Mac)
		case mac[0]&1 != 0:
			return cnierror.Newf(cnierror.CodeInvalidConfig, "mac: %q is a multicast address", *s.Mac)
		}
		p.Mac = mac
	}
	if s.Mtu != nil && *s.Mtu != 0 {
		if *s.Mtu < 68 || *s.Mtu > 65535 {
			return cnierror.Newf(cnierror.CodeInvalidConfig, "mtu: must be 68-65535, got %d", *s.Mtu)
		}
		p.Mtu = *s.Mtu
	}
	if s.TxQLen != nil && (*s.TxQLen < 0 || *s.TxQLen > 1<<31-1) {
		return cnierror.Newf(cnierror.CodeInvalidConfig, "txQLen: must be 0 or more, got %d", *s.TxQLen)
	}
	return nil
}

// changes reports whether s touches any link attribute (and so needs a backup of them).
func (s linkState) changes() bool {
	return s.Mac != nil || s.Mtu != 0 || s.Promisc != nil || s.Allmulti != nil || s.TxQLen != nil
}

// sysctls turns the configured keys into validated names, sorted for a stable order.
// A key is dotted ("net.ipv4.conf.IFNAME.rp_filter") or, when it holds a slash, already
// in slash form, which is how an interface name containing dots is written. IFNAME is
// replaced in each element after splitting, so the interface name's own dots stay put.
func sysctls(keys map[string]string, ifName string) ([]Sysctl, error) {
	out := make([]Sysctl, 0, len(keys))
	for key, value := range keys {
		sep := "."
		if strings.Contains(key, "/") {
			sep = "/"
		}
		parts := strings.Split(key, sep)
		for i := range parts {
			parts[i] = strings.ReplaceAll(parts[i], "IFNAME", ifName)
		}
		name := strings.Join(parts, "/")
		if _, err := sysctl.Name(name); err != nil {
			return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "sysctl: key %q refused: %v", key, err)
		}
		out = append(out, Sysctl{Key: key, Name: name, Value: value})
	}
	slices.SortFunc(out, func(a, b Sysctl) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
