package sysctl_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestNameAcceptsOnlyPathsUnderNet(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"net/ipv4/ip_forward", true},
		{"net/ipv6/conf/cni0.100/accept_dad", true},
		{"", false},
		{"/proc/sys/net/ipv4/ip_forward", false},
		{"net/../kernel/hostname", false},
		{"net/ipv4/../../kernel/hostname", false},
		{"kernel/hostname", false},
		{"net", false},
		{"net//ipv4/ip_forward", false},
		{"net/./ipv4", false},
		{"net/ipv4/", false},
		{"net.ipv4.ip_forward", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := sysctl.Name(c.name)
			if !c.ok {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "/proc/sys/"+c.name, p)
		})
	}
}

func TestSetGetAndForwardingStayInTheNamespace(t *testing.T) {
	testns.RequireRoot(t)
	t.Parallel()
	read := func(n *testns.NS, name string) string {
		var v string
		n.Run(t, func() (err error) { v, err = sysctl.Get(name); return err })
		return v
	}
	n := testns.New(t)
	assert.Equal(t, "0", read(n, "net/ipv4/ip_forward"), "a fresh namespace starts with forwarding off")
	n.Run(t, func() error { return sysctl.EnableForwarding(true, true) })
	assert.Equal(t, "1", read(n, "net/ipv4/ip_forward"))
	assert.Equal(t, "1", read(n, "net/ipv6/conf/all/forwarding"))
	n.Run(t, func() error { return sysctl.Set(sysctl.Iface("ipv4", "lo", "arp_notify"), "1") })
	assert.Equal(t, "1", read(n, "net/ipv4/conf/lo/arp_notify"))

	other := testns.New(t)
	assert.Equal(t, "0", read(other, "net/ipv4/ip_forward"), "the write stayed inside its namespace")
}

func TestSetRejectsBadNamesAndMissingFiles(t *testing.T) {
	assert.Error(t, sysctl.Set("net/../kernel/hostname", "x"))
	_, err := sysctl.Get("net/ipv4/conf/nosuchif0/arp_notify")
	assert.Error(t, err)
}
