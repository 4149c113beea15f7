package attachment_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
)

// A name can be on both sides (a bridge and a container interface both called eth0):
// the side asked for decides which one is found.
func TestPrevInterfaceFindsTheSideAskedFor(t *testing.T) {
	prev := &result.Result{Interfaces: []result.Interface{
		{Name: "cni0", Mac: "aa:aa:aa:aa:aa:01"},
		{Name: "eth0", Mac: "aa:aa:aa:aa:aa:02"},
		{Name: "eth0", Mac: "aa:aa:aa:aa:aa:03", Sandbox: "/var/run/netns/c"},
	}}
	host, ok := attachment.PrevInterface(prev, "eth0", false)
	assert.True(t, ok)
	assert.Equal(t, "aa:aa:aa:aa:aa:02", host.Mac)
	cont, ok := attachment.PrevInterface(prev, "eth0", true)
	assert.True(t, ok)
	assert.Equal(t, "aa:aa:aa:aa:aa:03", cont.Mac)
	_, ok = attachment.PrevInterface(prev, "cni0", true)
	assert.False(t, ok, "cni0 is in no sandbox")
	_, ok = attachment.PrevInterface(prev, "veth1", false)
	assert.False(t, ok)
}
