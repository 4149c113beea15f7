package bridge

import (
	"cmp"
	"fmt"
	"net"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the bridge plugin's configuration (the keys beyond the spec's common ones).
type Config struct {
	Name                      string      `json:"name"`
	masq.Config                           // ipMasq, ipMasqIPv4, ipMasqIPv6, ipMasqBackend
	Bridge                    string      `json:"bridge"`
	IsGateway                 bool        `json:"isGateway"`
	IsDefaultGateway          bool        `json:"isDefaultGateway"`
	ForceAddress              bool        `json:"forceAddress"`
	MTU                       int         `json:"mtu"`
	HairpinMode               bool        `json:"hairpinMode"`
	PromiscMode               bool        `json:"promiscMode"`
	VLAN                      int         `json:"vlan"`
	VLANTrunk                 []VLANRange `json:"vlanTrunk"`
	PreserveDefaultVLAN       bool        `json:"preserveDefaultVlan"`
	EnableDAD                 bool        `json:"enabledad"`
	MacSpoofChk               bool        `json:"macspoofchk"`
	DisableContainerInterface bool        `json:"disableContainerInterface"`
	PortIsolation             bool        `json:"portIsolation"`

	Args struct {
		CNI struct {
			MAC string `json:"mac"`
		} `json:"cni"`
	} `json:"args"`
	RuntimeConfig struct {
		MAC string `json:"mac"`
	} `json:"runtimeConfig"`

	// Derived by load.
	mac      net.HardwareAddr
	trunk    []VLANRange
	hasIPAM  bool
	needVLAN bool
}

// VLANRange is one vlanTrunk entry: a single {"id"} or a {"minID","maxID"} range.
type VLANRange struct {
	ID    *int `json:"id,omitempty"`
	MinID *int `json:"minID,omitempty"`
	MaxID *int `json:"maxID,omitempty"`
}

const (
	defaultBridge = "cni0"
	minMTU        = 68 // the smallest MTU IPv4 allows
	maxMTU        = 65535
)

// load parses and validates the config once, resolving the MAC from CNI_ARGS, args and
// runtimeConfig (later ones win, as in the reference).
func load(req *skel.Request) (*Config, error) {
	c, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	c.Bridge = cmp.Or(c.Bridge, defaultBridge)
	if err := skel.ValidateIfNameField("bridge", c.Bridge); err != nil {
		return nil, err
	}
	c.hasIPAM = req.Net.IPAM.Type != ""
	c.IsGateway = c.IsGateway || c.IsDefaultGateway
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.resolveMAC(req.Args.CNIArgs); err != nil {
		return nil, err
	}
	return c, nil
}

// delConfig is what DEL reads of the config: the keys that decide its teardown steps.
type delConfig struct {
	masq.Config
	MacSpoofChk bool `json:"macspoofchk"`
}

// loadForDel reads delConfig without validating anything else. A value of the wrong
// type cannot tell whether ADD masqueraded or set up the spoof check, so both are torn
// down: removing what is not there is harmless, leaving what is there is a leak.
func loadForDel(req *skel.Request) delConfig {
	c, err := skel.LoadConfig[delConfig](req)
	if err != nil {
		fmt.Fprintf(req.Stderr, "bridge: %v; tearing down masquerade and spoof check anyway\n", err)
		return delConfig{Config: masq.Config{IPMasq: true}, MacSpoofChk: true}
	}
	return *c
}

func (c *Config) validate() error {
	switch {
	case c.MTU != 0 && (c.MTU < minMTU || c.MTU > maxMTU):
		return cnierror.Invalid("mtu: must be %d-%d, got %d", minMTU, maxMTU, c.MTU)
	case c.HairpinMode && c.PromiscMode:
		return cnierror.Invalid("hairpinMode, promiscMode: cannot both be set")
	case c.VLAN < 0 || c.VLAN > 4094:
		return cnierror.Invalid("vlan: must be 0-4094, got %d", c.VLAN)
	case c.DisableContainerInterface && c.hasIPAM:
		return cnierror.Invalid("disableContainerInterface: cannot be used with ipam")
	}
	for i, r := range c.VLANTrunk {
		norm, err := r.normalise(i)
		if err != nil {
			return err
		}
		c.trunk = append(c.trunk, norm)
	}
	c.needVLAN = c.VLAN != 0 || len(c.trunk) > 0
	return nil
}

// normalise checks one trunk entry and returns it as a min/max range.
func (r VLANRange) normalise(i int) (VLANRange, error) {
	valid := func(v int) bool { return v >= 1 && v <= 4094 }
	switch {
	case r.ID != nil && (r.MinID != nil || r.MaxID != nil):
		return r, cnierror.Invalid("vlanTrunk[%d]: set either id or minID/maxID", i)
	case r.ID != nil:
		if !valid(*r.ID) {
			return r, cnierror.Invalid("vlanTrunk[%d].id: must be 1-4094, got %d", i, *r.ID)
		}
		return VLANRange{MinID: r.ID, MaxID: r.ID}, nil
	case r.MinID == nil || r.MaxID == nil:
		return r, cnierror.Invalid("vlanTrunk[%d]: needs id, or both minID and maxID", i)
	case !valid(*r.MinID) || !valid(*r.MaxID):
		return r, cnierror.Invalid("vlanTrunk[%d]: minID and maxID must be 1-4094, got %d-%d", i, *r.MinID, *r.MaxID)
	case *r.MinID > *r.MaxID:
		return r, cnierror.Invalid("vlanTrunk[%d]: minID %d is greater than maxID %d", i, *r.MinID, *r.MaxID)
	}
	return r, nil
}

func (c *Config) resolveMAC(cniArgs string) error {
	args, err := skel.ParseCNIArgs(cniArgs, "MAC", "IP", "GATEWAY")
	if err != nil {
		return err
	}
	c.mac, err = link.ContainerMAC(link.MACSource{Field: "CNI_ARGS MAC", Value: args["MAC"]},
		link.MACSource{Field: "args.cni.mac", Value: c.Args.CNI.MAC},
		link.MACSource{Field: "runtimeConfig.mac", Value: c.RuntimeConfig.MAC})
	return err
}
