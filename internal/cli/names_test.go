package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/cli"
)

// The names below were derived with the hand-written internal/sha2, before issue 17
// replaced it with crypto/sha256 and crypto/sha512. They exist on nodes (cnitool's
// container ids, in its cache), so they must never change; cmd/cni's
// TestDigestsMatchTheHandWrittenOnes compares the digests themselves over every padding
// case and random inputs.
func TestNamesAreThoseDerivedBeforeTheSwitchToCrypto(t *testing.T) {
	id240 := strings.Repeat("0123456789abcdef", 15)
	for _, c := range []struct{ got, want string }{
		{cli.ContainerID("/var/run/netns/a"), "cnitool-ef6ee0d0435bc09b9af0"},
		{cli.ContainerID("/var/run/netns/cni-0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "cnitool-fe16f1a415ffc15129cb"},
		{cli.ContainerID("/proc/1234567/task/1234567/ns/net" + id240), "cnitool-70a911fdb35a7f5dbda6"},
	} {
		assert.Equal(t, c.want, c.got)
	}
}
