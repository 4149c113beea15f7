package flannel_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestDataDirThatIsNoDirectoryIsAConfigErrorAndDeletesNothing: a dataDir that is a
// regular file, or a path below one, is the config's fault: ADD is code 7 naming
// dataDir (it was 999, the kernel's "not a directory"), and since no ADD can have stored
// anything there, DEL and GC succeed (every DEL failed with 999 for ever, as the
// reference's does). Nothing of the attempted ADD is left.
func TestDataDirThatIsNoDirectoryIsAConfigErrorAndDeletesNothing(t *testing.T) {
	t.Parallel()
	pt.ForEachDataDirThatIsNoDirectory(t, func(t *testing.T, dataDir string) {
		t.Parallel()
		w := newWorld(t)
		w.writeEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\n")
		w.dataDir = dataDir
		conf := w.conf("")
		ctr := testns.NewWithLoopback(t)

		_, err := w.invoke("ADD", "ctr-a", ctr.Path, conf)
		pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "dataDir")
		for i := range 2 {
			_, err = w.invoke("DEL", "ctr-a", ctr.Path, conf)
			assert.NoError(t, err, "DEL %d", i+1)
		}
		_, err = w.invoke("GC", "", "", w.conf(`"cni.dev/valid-attachments":[]`))
		assert.NoError(t, err, "GC")
		assert.Empty(t, w.reservations())
		assert.Empty(t, w.hostVeths())
	})
}
