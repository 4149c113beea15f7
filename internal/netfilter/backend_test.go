package netfilter

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/cnierror"
	"github.com/cnikit/cni/internal/testns"
)

func TestChooseHonoursExplicitSettings(t *testing.T) {
	b, err := Choose("backend", "iptables")
	require.NoError(t, err)
	assert.Equal(t, IPTables, b)
	b, err = Choose("backend", "nftables")
	require.NoError(t, err)
	assert.Equal(t, NFTables, b)
	_, err = Choose("ipMasqBackend", "ebtables")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Contains(t, err.Error(), "ipMasqBackend")
}

// A fresh namespace has no legacy tables and the kernel speaks nf_tables: nftables.
func TestDetectPrefersNFTablesInACleanNamespace(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	host.Run(t, func() error {
		assert.Equal(t, NFTables, Detect())
		return nil
	})
}

// Once the legacy iptables backend holds a table in the namespace, rules must go there.
func TestDetectFollowsLegacyIPTablesInUse(t *testing.T) {
	testns.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy"); err != nil {
		t.Skip("iptables-legacy is not installed")
	}
	host := testns.New(t)
	_, err := host.Exec(t, "iptables-legacy", "-t", "nat", "-L")
	require.NoError(t, err)
	host.Run(t, func() error {
		assert.Equal(t, IPTables, Detect())
		return nil
	})
}
