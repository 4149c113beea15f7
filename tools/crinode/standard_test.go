package crinode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStandardListIsTheShippedConflist: the e2e suite and the bench run the standard
// chain the repository ships (deploy/net.d/10-std.conflist, which README.md installs
// and the docs show), compared as JSON.
func TestStandardListIsTheShippedConflist(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "net.d", "10-std.conflist"))
	require.NoError(t, err)
	var want, got any
	require.NoError(t, json.Unmarshal(shipped, &want))
	require.NoError(t, json.Unmarshal([]byte(StandardList), &got))
	require.Equal(t, want, got, "StandardList is not deploy/net.d/10-std.conflist")
}
