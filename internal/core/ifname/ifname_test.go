package ifname_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/ifname"
)

// TestKernelRuleTakesControlCharacters: the kernel (and libcni) take an interface name
// with a control character, which Check refuses; both refuse the rest.
func TestKernelRuleTakesControlCharacters(t *testing.T) {
	for _, name := range []string{"e\x7f", "e\x01"} {
		assert.NoError(t, ifname.CheckKernel(name), "%q", name)
		assert.Error(t, ifname.Check(name), "%q", name)
	}
	for _, name := range []string{"", ".", "..", "a/b", "a:b", "a b", "a\tb", "abcdefghijklmnop"} {
		assert.Error(t, ifname.CheckKernel(name), "%q", name)
		assert.Error(t, ifname.Check(name), "%q", name)
	}
	assert.NoError(t, ifname.CheckKernel("eth0"))
	assert.NoError(t, ifname.Check("abcdefghijklmno"), "15 bytes is the most the kernel takes")
}

func TestKernelReservedNamesAreTheSysctlDefaults(t *testing.T) {
	assert.True(t, ifname.KernelReserved("all"))
	assert.True(t, ifname.KernelReserved("default"))
	assert.False(t, ifname.KernelReserved("eth0"))
	assert.False(t, ifname.KernelReserved("All"), "the kernel's names are lower case")
}
