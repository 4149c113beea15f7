package cli_test

import (
	"testing"

	"github.com/cnikit/cni/internal/runtime/cli"
	"github.com/cnikit/cni/internal/testbed/plugintest/nametest"
)

// The names below exist on nodes (cnitool's container ids, in its cache): they must be
// those derived before the switch to crypto/sha2 (see nametest).
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	nametest.AssertUnchanged(t, []nametest.Name{
		{cli.ContainerID("/var/run/netns/a"), "cnitool-ef6ee0d0435bc09b9af0"},
		{cli.ContainerID("/var/run/netns/cni-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "cnitool-fe16f1a415ffc15129cb"},
		{cli.ContainerID("/proc/1234567/task/1234567/ns/net" + nametest.ID240), "cnitool-70a911fdb35a7f5dbda6"},
	})
}
