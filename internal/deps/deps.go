//go:build tools

package deps

import (
	_ "github.com/containernetworking/cni/libcni"
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/google/nftables"
	_ "github.com/stretchr/testify/require"
	_ "github.com/vishvananda/netlink"
	_ "github.com/vishvananda/netns"
)
