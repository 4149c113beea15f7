package flannel_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/host/masq"
	"github.com/cnikit/cni/internal/host/sysctl"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/result"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// world is one test's flannel node: a host namespace, the subnet file the daemon would
// write, flannel's data dir and host-local's.
type world struct {
	t                                testing.TB
	host                             *testns.NS
	subnetFile, dataDir, ipamDataDir string
	path                             []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	testns.RequireRoot(t)
	w := &world{t: t, host: testns.NewWithLoopback(t), subnetFile: filepath.Join(t.TempDir(), "subnet.env"),
		dataDir: filepath.Join(t.TempDir(), "flannel"), ipamDataDir: t.TempDir(), path: []string{t.TempDir()}}
	w.host.Run(t, func() error {
		// Links created from now on skip DAD, so IPv6 addresses are usable at once.
		if err := sysctl.Set("net/ipv6/conf/all/accept_dad", "0"); err != nil {
			return err
		}
		return sysctl.Set("net/ipv6/conf/default/accept_dad", "0")
	})
	return w
}

const v4Env = "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=%s\n"

const v6Env = "FLANNEL_IPV6_NETWORK=fd44::/56\nFLANNEL_IPV6_SUBNET=fd44:0:0:3::1/64\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n"

func (w *world) writeEnv(content string) {
	w.t.Helper()
	require.NoError(w.t, os.WriteFile(w.subnetFile, []byte(content), 0o644))
}

// conf is a flannel config for the world's files with extra top-level keys.
func (w *world) conf(extra string) []byte {
	s := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"flnet","type":"flannel","subnetFile":%q,"dataDir":%q,"ipam":{"dataDir":%q}`,
		w.subnetFile, w.dataDir, w.ipamDataDir)
	if extra != "" {
		s += "," + extra
	}
	return []byte(s + "}")
}

// linkRecorder puts the chain's recorder test plugin, a third-party delegate, on the
// plugin path as "recorder".
func (w *world) linkRecorder() {
	w.t.Helper()
	rec, err := testns.BuildHelper("../../chain/testdata/recorder")
	require.NoError(w.t, err)
	if !testns.Prebuilt() {
		w.t.Cleanup(func() { os.RemoveAll(filepath.Dir(rec)) })
	}
	require.NoError(w.t, os.Symlink(rec, filepath.Join(w.path[0], "recorder")))
}

// invoke runs flannel in-process inside the host namespace, with the registry's
// lookup, as the cni binary does.
func (w *world) invoke(cmd, cid, netns string, config []byte) (*result.Result, error) {
	return pt.Invoke(w.t, w.host, flannel.New(dispatch.Lookup), pt.Call{Command: cmd, ContainerID: cid, Netns: netns,
		IfName: "eth0", Path: strings.Join(w.path, ":"), Config: config, Env: os.Environ()})
}

// addPod writes the subnet file with env and ADDs container ctr-a, which must succeed.
func (w *world) addPod(t *testing.T, env string) (*testns.NS, *result.Result) {
	t.Helper()
	w.writeEnv(env)
	ctr := testns.NewWithLoopback(t)
	res, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
	require.NoError(t, err)
	return ctr, res
}

// reservations lists host-local's reserved addresses of the network.
func (w *world) reservations() []string {
	return pt.Reservations(w.t, filepath.Join(w.ipamDataDir, "flnet"))
}

// stored lists the container ids with a stored delegate config; a dot file is one
// being written.
func (w *world) stored() []string {
	return slices.DeleteFunc(pt.Entries(w.t, w.dataDir), func(n string) bool { return strings.HasPrefix(n, ".") })
}

// masqueraded reports whether the host masquerades the attachment's addresses.
func (w *world) masqueraded(cid string, res *result.Result) bool {
	att := masq.Attachment{Network: "flnet", ContainerID: cid, IfName: "eth0"}
	for _, ip := range res.IPs {
		att.IPs = append(att.IPs, ip.Address)
	}
	var err error
	w.host.Run(w.t, func() error {
		err = masq.Check(context.Background(), att, masq.Options{IPv4: true, IPv6: true})
		return nil
	})
	return err == nil
}

// hostVeths names the veths in the host namespace.
func (w *world) hostVeths() []string {
	links, err := w.host.Handle(w.t).LinkList()
	require.NoError(w.t, err)
	var out []string
	for _, l := range links {
		if l.Type() == "veth" {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}
