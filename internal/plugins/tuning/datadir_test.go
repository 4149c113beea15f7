package tuning

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// TestDataDirThatIsNoDirectoryIsAConfigError: a dataDir that is a regular file, or a
// path below one, is code 7 naming dataDir on ADD (it was 999, the kernel's "not a
// directory"), before the interface is changed; DEL then finds no backup and succeeds.
func TestDataDirThatIsNoDirectoryIsAConfigError(t *testing.T) {
	for _, below := range []string{"", "sub"} {
		t.Run("file"+filepath.Join("/", below), func(t *testing.T) {
			f := setup(t)
			file := filepath.Join(t.TempDir(), "afile")
			require.NoError(t, os.WriteFile(file, nil, 0o600))
			f.dataDir = filepath.Join(file, below)
			before := f.read(t)
			conf := f.conf(`"mtu":1400`)

			_, err := f.invoke(t, Plugin(), "ADD", conf)
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "dataDir")
			assert.Equal(t, before, f.read(t), "the interface is as it was")
			_, err = f.invoke(t, Plugin(), "DEL", conf)
			assert.NoError(t, err)
		})
	}
}
