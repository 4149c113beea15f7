package buildflags

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBinariesKeepTheOrderGiven(t *testing.T) {
	bins, err := Binaries("arm64=bin/a,amd64=bin/b")
	require.NoError(t, err)
	assert.Equal(t, []Binary{{"arm64", "bin/a"}, {"amd64", "bin/b"}}, bins)
}

func TestBinariesRefuseAnEntryWithoutArchOrPath(t *testing.T) {
	for _, s := range []string{"", "amd64", "=bin/cni", "amd64=", "amd64=bin/cni,"} {
		_, err := Binaries(s)
		assert.ErrorContains(t, err, "-bin: want ARCH=PATH", "%q", s)
	}
}

func TestEpochIsSecondsSince1970InUTC(t *testing.T) {
	got, err := Epoch("1700000000")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(1700000000, 0).UTC(), got)
	zero, err := Epoch("")
	require.NoError(t, err)
	assert.Equal(t, time.Unix(0, 0).UTC(), zero)
	_, err = Epoch("yesterday")
	assert.ErrorContains(t, err, "-epoch")
}

func TestForIsThePathOfTheArchOrNothing(t *testing.T) {
	bins, err := Binaries("amd64=a/cni-gc-cri,arm64=b/cni-gc-cri")
	require.NoError(t, err)
	assert.Equal(t, "b/cni-gc-cri", For(bins, "arm64"))
	assert.Empty(t, For(bins, "riscv64"))
}
