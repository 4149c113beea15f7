package masq

import (
	"context"
	"fmt"

	"github.com/cnikit/cni/internal/host/netfilter"
	"github.com/cnikit/cni/internal/result"
)

// Config is the masquerade part of a bridge or ptp network config, with the reference
// plugins' keys. Plugins embed it in their own config struct, so the keys stay at the
// top level of the network config.
type Config struct {
	// IPMasq masquerades both families unless a per-family key says otherwise.
	IPMasq bool `json:"ipMasq"`
	// IPMasqIPv4 and IPMasqIPv6 override ipMasq for one family when set (#398).
	IPMasqIPv4 *bool `json:"ipMasqIPv4"`
	IPMasqIPv6 *bool `json:"ipMasqIPv6"`
	// IPMasqBackend is "iptables", "nftables", "auto" or "" (auto).
	IPMasqBackend string `json:"ipMasqBackend"`
}

// families resolves ipMasq and its per-family overrides.
func (c *Config) families() (v4, v6 bool) {
	v4, v6 = c.IPMasq, c.IPMasq
	if c.IPMasqIPv4 != nil {
		v4 = *c.IPMasqIPv4
	}
	if c.IPMasqIPv6 != nil {
		v6 = *c.IPMasqIPv6
	}
	return v4, v6
}

// Masquerading reports whether any family is masqueraded.
func (c *Config) Masquerading() bool {
	v4, v6 := c.families()
	return v4 || v6
}

// MasqOptions resolves the config into Options. ipMasqBackend is validated whenever it
// is set, but detection (a netlink round trip) only happens when masquerading is on: a
// plain ADD need not pay for it. The error is a CNI error naming ipMasqBackend.
func (c *Config) MasqOptions() (Options, error) {
	v4, v6 := c.families()
	opts := Options{IPv4: v4, IPv6: v6}
	if !c.Masquerading() && c.IPMasqBackend == "" {
		return opts, nil
	}
	var err error
	if opts.Backend, err = netfilter.Choose("ipMasqBackend", c.IPMasqBackend); err != nil {
		return Options{}, err
	}
	return opts, nil
}

// Unmasquerade tears down the attachment's masquerade when the config masquerades (DEL
// needs no addresses for it); the error is prefixed with the ipMasq key.
func (c *Config) Unmasquerade(ctx context.Context, network, containerID, ifName string) error {
	if !c.Masquerading() {
		return nil
	}
	if err := Teardown(ctx, network, containerID, ifName); err != nil {
		return fmt.Errorf("ipMasq: %w", err)
	}
	return nil
}

// NewAttachment is the attachment of a container's interface on network, with the
// addresses of ips.
func NewAttachment(network, containerID, ifName string, ips []result.IPConfig) Attachment {
	att := Attachment{Network: network, ContainerID: containerID, IfName: ifName}
	for _, ip := range ips {
		att.IPs = append(att.IPs, ip.Address)
	}
	return att
}

// RepairMasquerade puts back the attachment's masquerade when the config masquerades
// and Check finds it missing (a host firewall reload removed it), in the backend ADD
// and CHECK choose (MasqOptions). found is told what is missing, prefixed with the
// ipMasq key, and says whether to put it back (no in a dry run). Setup replaces
// whatever part of the attachment's rules is left, so this is idempotent.
func (c *Config) RepairMasquerade(ctx context.Context, att Attachment, found func(what string) bool) error {
	if !c.Masquerading() {
		return nil
	}
	opts, err := c.MasqOptions()
	if err != nil {
		return err
	}
	err = Check(ctx, att, opts)
	if err == nil || !found("ipMasq: "+err.Error()) {
		return nil
	}
	if err := Setup(ctx, att, opts); err != nil {
		return fmt.Errorf("ipMasq: %w", err)
	}
	return nil
}
