package flannel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/statedir"
)

// SubnetEnv is what the flannel daemon writes to its subnet file (/run/flannel/subnet.env)
// once it holds a lease: the cluster networks, this node's subnet of them, the MTU of
// the overlay and whether the daemon masquerades itself.
type SubnetEnv struct {
	// Networks and IPv6Networks are FLANNEL_NETWORK and FLANNEL_IPV6_NETWORK: comma-
	// separated, masked, without duplicates.
	Networks     []netip.Prefix
	IPv6Networks []netip.Prefix
	// Subnet and IPv6Subnet are FLANNEL_SUBNET and FLANNEL_IPV6_SUBNET, masked (the
	// daemon writes the gateway address, 10.1.17.1/24; the range is 10.1.17.0/24).
	Subnet     netip.Prefix
	IPv6Subnet netip.Prefix
	MTU        *uint32 // FLANNEL_MTU
	IPMasq     *bool   // FLANNEL_IPMASQ: only "true" is true, as in the reference
}

// maxSubnetFile bounds what is read of a subnet file: the daemon writes six short lines.
const maxSubnetFile = 64 << 10

// LoadSubnetEnv reads and parses the subnet file at path. A file that does not exist yet
// is code 11, "try again later": the daemon writes it once it has its lease, which
// happens after the node (and its runtime) started. A file that exists but lacks keys
// or holds bad values is code 7, invalid network configuration: the daemon writes the
// file through a rename, so a reader never sees it half-written, and such a file does
// not mend itself by waiting.
func LoadSubnetEnv(path string) (*SubnetEnv, error) {
	data, err := statedir.ReadPath(path, maxSubnetFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, cnierror.Newf(cnierror.CodeTryAgainLater,
			"subnet file %s does not exist (yet): is the flannel daemon running and holding a lease?", path)
	case errors.Is(err, statedir.ErrTooLarge):
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "subnet file %s: larger than %d bytes", path, maxSubnetFile)
	case errors.Is(err, statedir.ErrNotRegular):
		// A FIFO or device is not what the daemon writes there, and does not mend by waiting.
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "subnet file %s: not a regular file", path)
	case err != nil:
		return nil, fmt.Errorf("subnet file: %w", err)
	}
	env, err := ParseSubnetEnv(data)
	if err != nil {
		return nil, cnierror.Newf(cnierror.CodeInvalidConfig, "subnet file %s: %v", path, err)
	}
	return env, nil
}

// ParseSubnetEnv parses subnet file content: KEY=VALUE lines; other keys, blank lines
// and # comments are ignored. Every family present needs its network and its subnet,
// and FLANNEL_MTU and FLANNEL_IPMASQ are required; an error names every missing key.
func ParseSubnetEnv(data []byte) (*SubnetEnv, error) {
	env := &SubnetEnv{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxSubnetFile)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			continue // not an assignment, as the reference ignores unknown lines
		}
		if err := env.set(strings.TrimSpace(key), strings.TrimSpace(value)); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if missing := env.missing(); len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return env, nil
}

func (e *SubnetEnv) set(key, value string) error {
	var err error
	switch key {
	case "FLANNEL_NETWORK":
		e.Networks, err = prefixes(key, value, true)
	case "FLANNEL_IPV6_NETWORK":
		e.IPv6Networks, err = prefixes(key, value, false)
	case "FLANNEL_SUBNET":
		e.Subnet, err = prefix(key, value, true)
	case "FLANNEL_IPV6_SUBNET":
		e.IPv6Subnet, err = prefix(key, value, false)
	case "FLANNEL_MTU":
		mtu, perr := strconv.ParseUint(value, 10, 16)
		if perr != nil {
			return fmt.Errorf("%s: %q is not an MTU (0-65535)", key, value)
		}
		e.MTU = new(uint32(mtu))
	case "FLANNEL_IPMASQ":
		e.IPMasq = new(value == "true")
	}
	return err
}

func prefixes(key, value string, v4 bool) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(value, ",") {
		p, err := prefix(key, strings.TrimSpace(s), v4)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func prefix(key, value string, v4 bool) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(value)
	if err != nil || p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%s: %q is not a CIDR", key, value)
	}
	if p.Addr().Is4() != v4 {
		family := "IPv6"
		if v4 {
			family = "IPv4"
		}
		return netip.Prefix{}, fmt.Errorf("%s: %q is not an %s CIDR", key, value, family)
	}
	return p.Masked(), nil
}

// missing names the keys the file lacks. Unlike the reference, a family's network
// without its subnet (or the reverse) counts as missing the other key.
func (e *SubnetEnv) missing() []string {
	var m []string
	v4 := len(e.Networks) > 0 || e.Subnet.IsValid()
	v6 := len(e.IPv6Networks) > 0 || e.IPv6Subnet.IsValid()
	if !v4 && !v6 {
		m = append(m, "FLANNEL_NETWORK or FLANNEL_IPV6_NETWORK", "FLANNEL_SUBNET or FLANNEL_IPV6_SUBNET")
	}
	for _, k := range [...]struct {
		lacking bool
		key     string
	}{
		{v4 && len(e.Networks) == 0, "FLANNEL_NETWORK"},
		{v4 && !e.Subnet.IsValid(), "FLANNEL_SUBNET"},
		{v6 && len(e.IPv6Networks) == 0, "FLANNEL_IPV6_NETWORK"},
		{v6 && !e.IPv6Subnet.IsValid(), "FLANNEL_IPV6_SUBNET"},
		{e.MTU == nil, "FLANNEL_MTU"},
		{e.IPMasq == nil, "FLANNEL_IPMASQ"},
	} {
		if k.lacking {
			m = append(m, k.key)
		}
	}
	return m
}
