package hostlocal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// TestDataDirThatIsNoDirectoryIsAConfigError: an ipam.dataDir that is a regular file,
// or a path below one, is code 7 naming ipam.dataDir on ADD (it was 5, an I/O error,
// which reads as the node's disk failing); DEL and GC find nothing reserved there and
// succeed.
func TestDataDirThatIsNoDirectoryIsAConfigError(t *testing.T) {
	t.Parallel()
	for _, below := range []string{"", "sub"} {
		t.Run("file"+filepath.Join("/", below), func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "afile")
			require.NoError(t, os.WriteFile(file, nil, 0o600))
			n := newNetwork(t, map[string]any{"dataDir": filepath.Join(file, below),
				"ranges": []any{[]any{map[string]any{"subnet": "10.1.0.0/24"}}}})

			_, err := n.add("ctr1", "eth0")
			require.Error(t, err)
			assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
			assert.Contains(t, err.Error(), "ipam.dataDir")
			assert.NoError(t, n.del("ctr1", "eth0"))
			n.extra["cni.dev/valid-attachments"] = []any{}
			_, _, err = n.invoke("GC", "", "", "")
			assert.NoError(t, err)
		})
	}
}
