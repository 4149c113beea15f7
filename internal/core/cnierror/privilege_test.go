package cnierror

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPermissionErrorsSayOnceThatPrivilegeMayBeMissing(t *testing.T) {
	netlinkEPERM := fmt.Errorf("set lo up: %w", syscall.EPERM)
	hinted := WithPrivilegeHint(netlinkEPERM)
	assert.Equal(t, "set lo up: operation not permitted"+privilegeHint, hinted.Error())
	assert.ErrorIs(t, hinted, syscall.EPERM, "the chain stays")
	assert.Equal(t, hinted.Error(), WithPrivilegeHint(hinted).Error(), "said once")
	assert.Equal(t, hinted.Error(), WithPrivilegeHint(fmt.Errorf("ipam: %w", hinted)).Error()[len("ipam: "):], "said once through wrapping")

	typed := fmt.Errorf("host-local: %w", Newf(CodeIO, "lock %s: %v", "/var/lib/cni/networks/n", syscall.EACCES))
	got := From(WithPrivilegeHint(typed))
	assert.Equal(t, CodeIO, got.Code, "the code stays")
	assert.Equal(t, "host-local: lock /var/lib/cni/networks/n: permission denied"+privilegeHint, got.Msg)

	flattened := errors.New("iptables-restore: exit status 4: iptables-restore v1.8.9: Permission denied (you must be root)")
	assert.Contains(t, WithPrivilegeHint(flattened).Error(), privilegeHint)

	for _, other := range []error{nil, syscall.ENOENT, New(CodeInvalidConfig, "mtu: must be 68-65535")} {
		assert.Equal(t, other, WithPrivilegeHint(other))
	}
}
