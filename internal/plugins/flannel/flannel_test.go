package flannel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/background"
	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/version"
	"github.com/cnikit/cni/internal/dispatch"
	"github.com/cnikit/cni/internal/plugins/flannel"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	pt "github.com/cnikit/cni/internal/testbed/plugintest"
	"github.com/cnikit/cni/internal/testbed/testns"
)

// The result is the delegate's (bridge with host-local on the leased subnet): the
// reference's shape. The daemon's FLANNEL_IPMASQ decides whether the bridge masquerades.
func TestAddGivesTheReferenceShapeAndMasqueradesPerIPMasq(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctr, res := w.addPod(t, fmt.Sprintf(v4Env, "true"))

	require.Len(t, res.Interfaces, 3)
	assert.Equal(t, "cni0", res.Interfaces[0].Name, "the bridge, named as the reference's bridge names it")
	assert.Equal(t, "eth0", res.Interfaces[2].Name)
	assert.Equal(t, ctr.Path, res.Interfaces[2].Sandbox)
	require.Len(t, res.IPs, 1)
	assert.True(t, netip.MustParsePrefix("10.244.3.0/24").Contains(res.IPs[0].Address.Addr()), "%s", res.IPs[0].Address)
	assert.Equal(t, 24, res.IPs[0].Address.Bits())
	assert.Equal(t, "10.244.3.1", res.IPs[0].Gateway.String())
	require.Len(t, res.Routes, 1)
	assert.Equal(t, "10.244.0.0/16", res.Routes[0].Dst.String(), "a route to the cluster network")
	eth0, err := ctr.Handle(t).LinkByName("eth0")
	require.NoError(t, err)
	assert.Equal(t, 1400, eth0.Attrs().MTU, "FLANNEL_MTU")
	assert.Equal(t, eth0.Attrs().HardwareAddr.String(), res.Interfaces[2].Mac, "the kernel's MAC of eth0")
	assert.Equal(t, []string{res.IPs[0].Address.String()}, pt.AddrsIn(t, ctr, "eth0"), "the kernel's address of eth0")
	if cni0 := pt.AttrsIn(t, w.host, "cni0"); assert.NotNil(t, cni0, "the bridge") {
		assert.Equal(t, cni0.HardwareAddr.String(), res.Interfaces[0].Mac, "the kernel's MAC of cni0")
	}
	assert.False(t, w.masqueraded("ctr-a", res), "the daemon masquerades (FLANNEL_IPMASQ=true), so the bridge does not")
	assert.Equal(t, []string{"ctr-a"}, w.stored())

	w.writeEnv(fmt.Sprintf(v4Env, "false"))
	ctrB := testns.NewWithLoopback(t)
	resB, err := w.invoke("ADD", "ctr-b", ctrB.Path, w.conf(""))
	require.NoError(t, err)
	assert.True(t, w.masqueraded("ctr-b", resB), "FLANNEL_IPMASQ=false: the bridge masquerades")

	for _, c := range []struct {
		id string
		ns *testns.NS
	}{{"ctr-a", ctr}, {"ctr-b", ctrB}} {
		_, err = w.invoke("DEL", c.id, c.ns.Path, w.conf(""))
		require.NoError(t, err)
	}
	assert.False(t, w.masqueraded("ctr-b", resB))
	assert.Empty(t, w.reservations())
	assert.Empty(t, w.stored())
	assert.Empty(t, w.hostVeths())
	_, err = w.invoke("CHECK", "ctr-a", ctr.Path, pt.WithPrev(t, w.conf(""), res))
	assert.ErrorContains(t, err, "no delegate config", "CHECK after DEL")
	_, err = w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
	assert.NoError(t, err, "DEL again")
	assert.Empty(t, w.reservations(), "nothing more released or reserved")
}

// The node re-leased its subnet (or the daemon is gone): DEL runs the delegate with
// the config ADD stored and releases everything.
func TestDelAfterTheSubnetFileVanishedStillCleansUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctr, res := w.addPod(t, fmt.Sprintf(v4Env, "false"))
	require.Len(t, w.reservations(), 1)
	require.NoError(t, os.Remove(w.subnetFile))

	for range 2 {
		_, err := w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
		require.NoError(t, err)
	}
	assert.Empty(t, w.reservations())
	assert.Empty(t, w.stored())
	assert.Empty(t, w.hostVeths())
	assert.False(t, w.masqueraded("ctr-a", res))
}

func TestIPv6OnlyAndDualStackSubnetFiles(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env    string
		prefix []string
		routes []string
	}{
		"ipv6 only":  {v6Env, []string{"fd44:0:0:3::/64"}, []string{"fd44::/56"}},
		"dual stack": {fmt.Sprintf(v4Env, "true") + v6Env, []string{"10.244.3.0/24", "fd44:0:0:3::/64"}, []string{"10.244.0.0/16", "fd44::/56"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			ctr, res := w.addPod(t, tc.env)
			require.Len(t, res.IPs, len(tc.prefix))
			for i, p := range tc.prefix {
				assert.True(t, netip.MustParsePrefix(p).Contains(res.IPs[i].Address.Addr()), "%s in %s", res.IPs[i].Address, p)
			}
			var routes []string
			for _, r := range res.Routes {
				routes = append(routes, r.Dst.String())
			}
			assert.Equal(t, tc.routes, routes)
			addrs, err := ctr.Handle(t).AddrList(nil, netlink.FAMILY_V6)
			require.NoError(t, err)
			found := false
			for _, a := range addrs {
				found = found || a.IP.Equal(res.IPs[len(res.IPs)-1].Address.Addr().AsSlice())
			}
			assert.True(t, found, "the IPv6 address is on eth0")
			_, err = w.invoke("CHECK", "ctr-a", ctr.Path, pt.WithPrev(t, w.conf(""), res))
			assert.NoError(t, err)
			_, err = w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
			require.NoError(t, err)
			assert.Empty(t, w.reservations())
		})
	}
}

// The reference's CHECK does nothing; this one runs the delegate's.
func TestCheckRunsTheDelegatesCheck(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctr, res := w.addPod(t, fmt.Sprintf(v4Env, "true"))
	check := pt.WithPrev(t, w.conf(""), res)
	_, err := w.invoke("CHECK", "ctr-a", ctr.Path, check)
	require.NoError(t, err)

	h := ctr.Handle(t)
	eth0, err := h.LinkByName("eth0")
	require.NoError(t, err)
	addr, err := netlink.ParseAddr(res.IPs[0].Address.String())
	require.NoError(t, err)
	require.NoError(t, h.AddrDel(eth0, addr))
	_, err = w.invoke("CHECK", "ctr-a", ctr.Path, check)
	assert.ErrorContains(t, err, "not found")

	_, err = w.invoke("CHECK", "ctr-other", ctr.Path, check)
	assert.ErrorContains(t, err, "no delegate config")
}

// The reference leaves the delegate config behind when the delegate's ADD fails.
func TestFailedAddUndoesTheDelegateAndItsConfig(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "false"))
	// A link called like the bridge that is no bridge: bridge's ADD fails.
	testns.Veth(t, w.host, "notbr", nil, testns.New(t), "peer", nil)
	ctr := testns.NewWithLoopback(t)
	_, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(`"delegate":{"bridge":"notbr"}`))
	require.Error(t, err)
	assert.Empty(t, w.stored())
	assert.Empty(t, w.reservations())
	assert.Equal(t, []string{"notbr"}, w.hostVeths())
}

// A refused ADD stores no delegate config (the data dir is not even made), reserves no
// address and makes no bridge or veth.
func TestRefusedAddNamesTheFieldAndLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	ctr := testns.NewWithLoopback(t)
	for name, tc := range map[string]struct{ extra, field string }{
		"delegate name":        {`"delegate":{"name":"x"}`, "delegate"},
		"delegate type path":   {`"delegate":{"type":"../bridge"}`, "delegate"},
		"delegate not object":  {`"delegate":[]`, "delegate"},
		"bad ipam route":       {`"ipam":{"dataDir":"` + w.ipamDataDir + `","routes":[{"dst":"nope"}]}`, "routes"},
		"runtimeConfig a list": {`"runtimeConfig":[]`, "runtimeConfig"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(tc.extra))
			pt.RequireRefused(t, err, cnierror.CodeInvalidConfig, tc.field)
			assert.NoDirExists(t, w.dataDir, "no data dir, no stored config")
			assert.Empty(t, w.reservations())
			assert.Equal(t, []string{"lo"}, pt.Links(t, w.host), "no bridge, no veth")
			assert.Equal(t, []string{"lo"}, pt.Links(t, ctr))
		})
	}
}

func TestMissingOrPartialSubnetFileIsAClearError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctr := testns.NewWithLoopback(t)
	_, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
	assert.Equal(t, cnierror.CodeTryAgainLater, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, "does not exist")

	w.writeEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_IPMASQ=true\n")
	_, err = w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
	assert.ErrorContains(t, err, "missing FLANNEL_SUBNET, FLANNEL_MTU")
	assert.Empty(t, w.stored())
}

func TestStatusNeedsTheSubnetFileAndAsksTheDelegate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, err := w.invoke("STATUS", "", "", w.conf(""))
	assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err), "%v", err)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	_, err = w.invoke("STATUS", "", "", w.conf(""))
	assert.NoError(t, err)

	// host-local answers STATUS with code 50 once its range is exhausted: the delegate
	// really is asked.
	w.writeEnv("FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/30\nFLANNEL_MTU=1400\nFLANNEL_IPMASQ=true\n")
	ctr := testns.NewWithLoopback(t)
	_, err = w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
	require.NoError(t, err)
	_, err = w.invoke("STATUS", "", "", w.conf(""))
	assert.Equal(t, cnierror.CodeNotAvailable, cnierror.Code(err), "%v", err)
}

func TestGCReachesTheDelegateAndForgetsStaleConfigs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "false"))
	a, b := testns.NewWithLoopback(t), testns.NewWithLoopback(t)
	resA, err := w.invoke("ADD", "ctr-a", a.Path, w.conf(""))
	require.NoError(t, err)
	resB, err := w.invoke("ADD", "ctr-b", b.Path, w.conf(""))
	require.NoError(t, err)
	require.Len(t, w.reservations(), 2)

	gc := w.conf(`"cni.dev/valid-attachments":[{"containerID":"ctr-a","ifname":"eth0"}]`)
	_, err = w.invoke("GC", "", "", gc)
	require.NoError(t, err)
	assert.Len(t, w.reservations(), 1, "host-local released ctr-b's address")
	assert.Equal(t, []string{"ctr-a"}, w.stored())
	assert.False(t, w.masqueraded("ctr-b", resB), "bridge collected ctr-b's masquerade")
	_, err = w.invoke("CHECK", "ctr-a", a.Path, pt.WithPrev(t, w.conf(""), resA))
	assert.NoError(t, err, "the valid attachment still checks")
	_, err = w.invoke("CHECK", "ctr-b", b.Path, pt.WithPrev(t, w.conf(""), resB))
	assert.ErrorContains(t, err, "no delegate config", "the collected attachment no longer checks")

	require.NoError(t, os.Remove(w.subnetFile))
	_, err = w.invoke("GC", "", "", w.conf(`"cni.dev/valid-attachments":[]`))
	require.NoError(t, err, "GC without a subnet file uses a stored delegate config")
	assert.Empty(t, w.reservations())
	assert.Empty(t, w.stored())
}

// The stored config's name is the container id; a symlink planted there is replaced,
// never written through, and a DEL meeting one drops it without reading its target.
func TestStoredConfigNeverFollowsASymlink(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	target := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(target, []byte(`{"type":"bridge"}`), 0o600))
	require.NoError(t, os.MkdirAll(w.dataDir, 0o700))
	require.NoError(t, os.Symlink(target, filepath.Join(w.dataDir, "ctr-a")))
	ctr := testns.NewWithLoopback(t)
	_, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
	require.NoError(t, err)
	fi, err := os.Lstat(filepath.Join(w.dataDir, "ctr-a"))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular(), "the symlink was replaced")
	content, _ := os.ReadFile(target)
	assert.Equal(t, `{"type":"bridge"}`, string(content))
	_, err = w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
	require.NoError(t, err)

	require.NoError(t, os.Symlink(target, filepath.Join(w.dataDir, "ctr-b")))
	_, err = w.invoke("DEL", "ctr-b", ctr.Path, w.conf(""))
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(w.dataDir, "ctr-b"))
	assert.True(t, os.IsNotExist(err), "the symlink is dropped")
	content, _ = os.ReadFile(target)
	assert.Equal(t, `{"type":"bridge"}`, string(content))
}

// TestDelKeepsTheStoredConfigWhenTheDelegatesLinkDeletionFails: the delegate's link
// deletion runs in the background of the process (link.NS.DeleteInBackground); flannel
// must still see its failure before it forgets the delegate config, or the runtime's
// retried DEL could not run the delegate again.
func TestDelKeepsTheStoredConfigWhenTheDelegatesLinkDeletionFails(t *testing.T) {
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "false"))
	failing := true
	fake := &skel.Plugin{Name: "fake", Versions: version.All(),
		Add: func(req *skel.Request) (*result.Result, error) {
			return &result.Result{CNIVersion: req.Net.CNIVersion}, nil
		},
		Del: func(req *skel.Request) error {
			return background.Start(req.Context(), func() error {
				if failing {
					return errors.New(`link "eth0": delete: device or resource busy`)
				}
				return nil
			})
		},
		Check: func(*skel.Request) error { return nil },
	}
	plugin := flannel.New(func(name string) *skel.Plugin {
		if name == "fake" {
			return fake
		}
		return dispatch.Lookup(name)
	})
	conf := w.conf(`"delegate":{"type":"fake"}`)
	args := skel.Args{Command: skel.CmdAdd, ContainerID: "c1", IfName: "eth0", Netns: testns.New(t).Path, Path: w.path}
	_, err := skel.Invoke(context.Background(), plugin, args, conf, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, []string{"c1"}, w.stored())

	args.Command = skel.CmdDel
	_, err = skel.Invoke(context.Background(), plugin, args, conf, os.Stderr)
	assert.ErrorContains(t, err, "device or resource busy")
	assert.Equal(t, []string{"c1"}, w.stored(), "kept for the retried DEL")
	failing = false
	_, err = skel.Invoke(context.Background(), plugin, args, conf, os.Stderr)
	require.NoError(t, err)
	assert.Empty(t, w.stored())
}

// TestDelegateThatCanNeverRunIsForgotten: a delegate whose type is not on CNI_PATH (a
// typo, a plugin uninstalled since ADD) or whose DEL refuses its own config can never
// succeed; keeping its stored config made every DEL fail for ever (the reference's
// second DEL succeeds). The failed ADD's undo forgets it too.
func TestDelegateThatCanNeverRunIsForgotten(t *testing.T) {
	t.Parallel()
	refusing := &skel.Plugin{Name: "refusing", Versions: version.All(),
		Add: func(req *skel.Request) (*result.Result, error) {
			return &result.Result{CNIVersion: req.Net.CNIVersion}, nil
		},
		Del:   func(*skel.Request) error { return cnierror.Invalid("mode: unknown") },
		Check: func(*skel.Request) error { return nil },
	}
	installed := func(types ...string) *skel.Plugin {
		return flannel.New(func(name string) *skel.Plugin {
			if slices.Contains(types, name) {
				return refusing
			}
			return dispatch.Lookup(name)
		})
	}
	for _, tc := range []struct {
		name         string
		delegate     string
		atAdd, atDel *skel.Plugin
		addFails     bool
	}{
		{name: "type not on CNI_PATH", delegate: "relnope", atAdd: installed(), atDel: installed(), addFails: true},
		{name: "uninstalled since ADD", delegate: "gone", atAdd: installed("gone"), atDel: installed()},
		{name: "its DEL refuses the config", delegate: "refusing", atAdd: installed("refusing"), atDel: installed("refusing")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.writeEnv(fmt.Sprintf(v4Env, "false"))
			conf := w.conf(fmt.Sprintf(`"delegate":{"type":%q}`, tc.delegate))
			args := skel.Args{Command: skel.CmdAdd, ContainerID: "c1", IfName: "eth0", Netns: testns.New(t).Path, Path: w.path}
			var stderr strings.Builder
			_, err := skel.Invoke(context.Background(), tc.atAdd, args, conf, &stderr)
			if tc.addFails {
				assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err), "%v", err)
				assert.Empty(t, w.stored(), "the failed ADD's undo forgets the config")
			} else {
				require.NoError(t, err)
				require.Equal(t, []string{"c1"}, w.stored())
			}
			args.Command = skel.CmdDel
			for i := range 2 {
				_, err = skel.Invoke(context.Background(), tc.atDel, args, conf, &stderr)
				require.NoError(t, err, "DEL %d", i+1)
				assert.Empty(t, w.stored())
			}
			if !tc.addFails {
				assert.Contains(t, stderr.String(), "can never succeed")
			}
		})
	}
}

// TestExecdDelOfADelegateNotOnThePathSucceeds is the runtime's view of the case above:
// ADD, DEL, DEL of the exec'd binary with a delegate type that is installed nowhere.
func TestExecdDelOfADelegateNotOnThePathSucceeds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeEnv(fmt.Sprintf(v4Env, "true"))
	dir := testns.LinkPluginDir(t, "flannel", "bridge", "host-local")
	conf := w.conf(`"delegate":{"type":"relnope"}`)
	ctr := testns.NewWithLoopback(t)
	for i, cmd := range []string{"ADD", "DEL", "DEL"} {
		o := pt.Exec(t, w.host, pt.Call{Bin: filepath.Join(dir, "flannel"), Command: cmd, ContainerID: "c1",
			Netns: ctr.Path, IfName: "eth0", Config: conf})
		if i == 0 {
			require.Error(t, o.Err, "ADD: %s", o)
			assert.Contains(t, o.Stdout, `"code": 7`)
			continue
		}
		require.NoError(t, o.Err, "%s %d: %s", cmd, i, o)
	}
	assert.Empty(t, w.stored())
}

// TestDelReadsOnlyTheDataDir: DEL needs the data dir alone to find its stored config.
// Keys it does not need never make it fail (it still deletes the attachment), and a
// data dir ADD refuses holds nothing of this plugin's: DEL succeeds and deletes nothing.
func TestDelReadsOnlyTheDataDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra string
		deletes     bool
	}{
		{"subnetFile relative", `"subnetFile":"subnet.env"`, true},
		{"delegate not an object", `"delegate":"bridge"`, true},
		{"delegate type not a string", `"delegate":{"type":7}`, true},
		{"dataDir relative", `"dataDir":"flannel"`, false},
		{"dataDir not a string", `"dataDir":7`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.writeEnv(fmt.Sprintf(v4Env, "false"))
			good := w.conf("")
			var c map[string]any
			require.NoError(t, json.Unmarshal(good, &c))
			var extra map[string]any
			require.NoError(t, json.Unmarshal([]byte("{"+tc.extra+"}"), &extra))
			for k, v := range extra {
				c[k] = v
			}
			bad, err := json.Marshal(c)
			require.NoError(t, err)
			ctr := testns.NewWithLoopback(t)
			_, err = w.invoke("ADD", "ctr-a", ctr.Path, bad)
			require.Error(t, err, "premise: ADD refuses it")
			_, err = w.invoke("ADD", "ctr-a", ctr.Path, good)
			require.NoError(t, err)

			for i := range 2 {
				_, err = w.invoke("DEL", "ctr-a", ctr.Path, bad)
				require.NoError(t, err, "DEL %d", i+1)
			}
			if tc.deletes {
				assert.Empty(t, w.stored())
				assert.Empty(t, w.reservations())
				assert.Empty(t, w.hostVeths())
			} else {
				assert.Equal(t, []string{"ctr-a"}, w.stored(), "nothing is deleted")
				assert.Len(t, w.reservations(), 1)
			}
		})
	}
}

// TestPlantedStoredConfigsNeitherHangNorFailDel: whatever an unlucky node or a local user
// leaves under a container's name in the data dir (a FIFO, a link to /dev/zero, a huge
// or garbage file, a directory), ADD replaces it, and DEL and GC finish and drop it.
func TestPlantedStoredConfigsNeitherHangNorFailDel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
	}{
		{"FIFO", func(t *testing.T, path string) { require.NoError(t, syscall.Mkfifo(path, 0o600)) }},
		{"link to /dev/zero", func(t *testing.T, path string) { require.NoError(t, os.Symlink("/dev/zero", path)) }},
		{"huge file", func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, []byte(`{"type":"bridge"}`+strings.Repeat(" ", 2<<20)), 0o600))
		}},
		{"garbage", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, []byte("\x00{"), 0o600)) }},
		{"directory", func(t *testing.T, path string) { require.NoError(t, os.MkdirAll(filepath.Join(path, "sub"), 0o700)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.writeEnv(fmt.Sprintf(v4Env, "false"))
			require.NoError(t, os.MkdirAll(w.dataDir, 0o700))
			path := filepath.Join(w.dataDir, "ctr-a")
			ctr := testns.NewWithLoopback(t)

			tc.plant(t, path)
			_, err := w.invoke("ADD", "ctr-a", ctr.Path, w.conf(""))
			require.NoError(t, err, "ADD replaces it")
			_, err = w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
			require.NoError(t, err)
			assert.Empty(t, w.reservations())

			tc.plant(t, path)
			for i := range 2 {
				_, err = w.invoke("DEL", "ctr-a", ctr.Path, w.conf(""))
				require.NoError(t, err, "DEL %d", i+1)
			}
			tc.plant(t, filepath.Join(w.dataDir, "ctr-b"))
			_, err = w.invoke("GC", "", "", w.conf(`"cni.dev/valid-attachments":[]`))
			require.NoError(t, err)
		})
	}
}
