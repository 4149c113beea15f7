package inproc_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
	"github.com/cnikit/cni/pkg/inproc"
)

// TestLoadFindsTheListLibcniFinds: Load and LoadFile read the list libcni's
// LoadConfList reads; a name no file defines is a *NotFoundError.
func TestLoadFindsTheListLibcniFinds(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "10-emb.conflist")
	require.NoError(t, os.WriteFile(file, []byte(standardChain("/tmp/unused")), 0o644))
	byName, err := inproc.Load(dir, "emb")
	require.NoError(t, err)
	byFile, err := inproc.LoadFile(file)
	require.NoError(t, err)
	theirs, err := libcni.LoadNetworkConf(dir, "emb")
	require.NoError(t, err)
	var types []string
	for _, p := range theirs.Plugins {
		types = append(types, p.Network.Type)
	}
	assert.Equal(t, types, byName.Types())
	assert.Equal(t, types, byFile.Types())
	assert.Equal(t, theirs.CNIVersion, byName.CNIVersion)
	assert.Equal(t, file, byName.File)

	_, err = inproc.Load(dir, "other")
	var nf *inproc.NotFoundError
	assert.ErrorAs(t, err, &nf)
}

// TestRunnerGCDeletesWhatIsNoLongerInUse: of two attachments a Runner ADDed, GC keeping
// one deletes the other (its veth, cache entry and address) and leaves the one kept;
// STATUS of the list is ready; a plugin's failure carries its code.
func TestRunnerGCDeletesWhatIsNoLongerInUse(t *testing.T) {
	testns.RequireRoot(t)
	host, ctr1, ctr2 := testns.New(t), testns.New(t), testns.New(t)
	cacheDir, ipamDir := t.TempDir(), filepath.Join(t.TempDir(), "ipam")
	n, err := inproc.Parse([]byte(standardChain(ipamDir)))
	require.NoError(t, err)
	r := &inproc.Runner{PluginPath: []string{t.TempDir()}, CacheDir: cacheDir}
	stale := inproc.Attachment{ContainerID: "stale", Netns: ctr1.Path, IfName: "eth0", CapabilityArgs: standardCaps}
	kept := inproc.Attachment{ContainerID: "kept", Netns: ctr2.Path, IfName: "eth0"}
	ctx := context.Background()
	host.Run(t, func() error {
		if _, err := r.Add(ctx, n, stale); err != nil {
			return err
		}
		if _, err := r.Add(ctx, n, kept); err != nil {
			return err
		}
		if err := r.GC(ctx, n, &inproc.GCArgs{ValidAttachments: []inproc.ValidAttachment{{ContainerID: "kept", IfName: "eth0"}}}); err != nil {
			return err
		}
		return r.Status(ctx, n)
	})
	assert.Equal(t, []string{"emb-kept-eth0"}, entries(t, filepath.Join(cacheDir, "results")))
	assert.NotContains(t, entries(t, filepath.Join(ipamDir, "emb")), "10.78.0.2", "the stale attachment's address")
	assert.Contains(t, entries(t, filepath.Join(ipamDir, "emb")), "10.78.0.3")
	out, err := ctr1.Exec(t, "ip", "-br", "link")
	require.NoError(t, err, out)
	assert.NotContains(t, out, "eth0")

	bad, err := inproc.Parse([]byte(`{"cniVersion":"1.1.0","name":"bad","plugins":[{"type":"portmap","snat":"yes"}]}`))
	require.NoError(t, err)
	host.Run(t, func() error {
		_, err = r.Add(ctx, bad, kept)
		return nil
	})
	var pe *inproc.PluginError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "portmap", pe.Type)
	assert.Equal(t, uint(7), inproc.Code(err))
	host.Run(t, func() error { return r.Del(ctx, n, kept) })
	assert.Empty(t, entries(t, filepath.Join(cacheDir, "results")))
}
