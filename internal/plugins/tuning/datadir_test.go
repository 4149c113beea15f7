package tuning

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cnikit/cni/internal/core/cnierror"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
)

// TestDataDirThatIsNoDirectoryIsAConfigError: a dataDir that is a regular file, or a
// path below one, is code 7 naming dataDir on ADD (it was 999, the kernel's "not a
// directory"), before the interface is changed; DEL then finds no backup and succeeds.
func TestDataDirThatIsNoDirectoryIsAConfigError(t *testing.T) {
	pt.ForEachDataDirThatIsNoDirectory(t, func(t *testing.T, dataDir string) {
		f := setup(t)
		f.dataDir = dataDir
		before := f.read(t)
		conf := f.conf(`"mtu":1400`)

		_, err := f.invoke(t, Plugin(), "ADD", conf)
		pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, "dataDir")
		assert.Equal(t, before, f.read(t), "the interface is as it was")
		_, err = f.invoke(t, Plugin(), "DEL", conf)
		assert.NoError(t, err)
	})
}
