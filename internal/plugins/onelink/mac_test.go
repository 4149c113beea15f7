package onelink

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

func TestContainerMACLaterSourcesWin(t *testing.T) {
	for _, tc := range []struct {
		cniArgs, conf, runtime, want string
	}{
		{"", "", "", ""},
		{"", "02:00:00:00:00:01", "", "02:00:00:00:00:01"},
		{"MAC=02:00:00:00:00:02", "02:00:00:00:00:01", "", "02:00:00:00:00:02"},
		{"IP=10.0.0.2;MAC=02:00:00:00:00:02", "02:00:00:00:00:01", "02:00:00:00:00:03", "02:00:00:00:00:03"},
	} {
		mac, err := ContainerMAC(tc.cniArgs, tc.conf, tc.runtime, "MAC", "IP")
		require.NoError(t, err, tc)
		if tc.want == "" {
			assert.Nil(t, mac, "the kernel chooses")
		} else {
			assert.Equal(t, tc.want, mac.String(), tc)
		}
	}
}

func TestContainerMACRefusesWhatItDoesNotKnow(t *testing.T) {
	_, err := ContainerMAC("IP=10.0.0.2", "", "", "MAC")
	assert.Equal(t, cnierror.CodeInvalidEnv, cnierror.From(err).Code, "a CNI_ARGS key the member does not take")
	_, err = ContainerMAC("", "not-a-mac", "", "MAC")
	assert.ErrorContains(t, err, "mac")
}
