package flannel_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// TestDataDirThatIsNoDirectoryIsAConfigErrorAndDeletesNothing: a dataDir that is a
// regular file, or a path below one, is the config's fault: ADD is code 7 naming
// dataDir (it was 999, the kernel's "not a directory"), and since no ADD can have stored
// anything there, DEL and GC succeed (every DEL failed with 999 for ever, as the
// reference's does). Nothing of the attempted ADD is left.
func TestDataDirThatIsNoDirectoryIsAConfigErrorAndDeletesNothing(t *testing.T) {
	t.Parallel()
	for _, below := range []string{"", "sub"} {
		t.Run("file"+filepath.Join("/", below), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.writeEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=false\n")
			file := filepath.Join(t.TempDir(), "afile")
			require.NoError(t, os.WriteFile(file, nil, 0o600))
			w.dataDir = filepath.Join(file, below)
			conf := w.conf("")
			ctr := testns.NewWithLoopback(t)

			_, err := w.invoke("ADD", "ctr-a", ctr.Path, conf)
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "dataDir")
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
}
