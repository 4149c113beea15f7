package nlconn

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opensItsOwn matches what opens a netlink handle or socket, or sends a hand-built
// request, without this package: a handle without a deadline, a request that may
// get no answer (issue 36).
var opensItsOwn = regexp.MustCompile(`netlink\.NewHandle(At|AtFrom)?\(|nl\.GetNetlinkSocketAt\(|nl\.Subscribe(At)?\(|\.Execute(Iter)?\(unix\.NETLINK_|\.Execute(Iter)?\(syscall\.NETLINK_`)

// TestEveryNetlinkHandleOfOursIsOpenedHere reads the production code of the module (no
// tests, no test bed, not the benchmark tool): only this package may open a netlink
// handle or socket or execute a hand-built request, so that each has the deadline.
func TestEveryNetlinkHandleOfOursIsOpenedHere(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "the module root")
	var offenders []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") || rel == "internal/testbed" || rel == "cmd/cnibench" || rel == "internal/host/nlconn"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			if opensItsOwn.MatchString(line) && !strings.HasPrefix(strings.TrimSpace(line), "//") {
				offenders = append(offenders, rel+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	}))
	assert.Empty(t, offenders, "open netlink handles and send hand-built requests through nlconn.Handle and nlconn.Execute")
}
