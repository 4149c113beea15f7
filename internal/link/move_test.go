package link_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/link"
	"github.com/cnikit/cni/internal/testns"
)

func TestRelocateRenamesIntoTheOtherNamespace(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	testns.Veth(t, hostNS, "dev0", nil, testns.New(t), "peer0", nil)
	// A link of the device's old name in the target does not matter: the device is
	// renamed before it arrives.
	testns.Veth(t, contNS, "dev0", nil, testns.New(t), "peer1", nil)

	l, err := link.Relocate(link.Relocation{From: host, To: cont, Name: "dev0", NewName: "eth0", Alias: "dev0"})
	require.NoError(t, err)
	assert.Equal(t, "eth0", l.Attrs().Name)
	assert.Equal(t, "dev0", l.Attrs().Alias)
	assert.Zero(t, l.Attrs().Flags&net.FlagUp, "arrives down")
	_, err = hostNS.Handle(t).LinkByName("dev0")
	assert.Error(t, err)

	back, err := link.Relocate(link.Relocation{From: cont, To: host, Name: "eth0", NewName: "dev0"})
	require.NoError(t, err)
	assert.Empty(t, back.Attrs().Alias)
}

func TestRelocateFailingPutsTheLinkBackAsItWas(t *testing.T) {
	t.Parallel()
	hostNS, contNS, host, cont := pair(t)
	testns.Veth(t, hostNS, "dev0", nil, testns.New(t), "peer0", nil)
	h := hostNS.Handle(t)
	l, err := h.LinkByName("dev0")
	require.NoError(t, err)
	require.NoError(t, h.LinkSetAlias(l, "keep me"))
	testns.Veth(t, contNS, "eth0", nil, testns.New(t), "peer1", nil)

	_, err = link.Relocate(link.Relocation{From: host, To: cont, Name: "dev0", NewName: "eth0", Alias: "dev0"})
	require.ErrorIs(t, err, syscall.EEXIST)
	l, err = h.LinkByName("dev0")
	require.NoError(t, err, "back under its old name")
	assert.Equal(t, "keep me", l.Attrs().Alias)
	assert.NotZero(t, l.Attrs().Flags&net.FlagUp, "up again")
}
