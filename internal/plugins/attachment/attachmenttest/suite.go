package attachmenttest

import (
	"encoding/json"
	"path/filepath"
	"testing"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/kernelfeature"
	"github.com/cnikit/cni/internal/testbed/plugintest"
)

// Suite holds what every one-link plugin must do alike, whatever its link: each
// plugin's package runs it (Run) with the keys of a config that works for it and the
// bad input it must refuse.
type Suite struct {
	// Plugin makes the plugin under test.
	Plugin func() *skel.Plugin
	// Needs are the kernel features the plugin's link needs (none for macvlan).
	Needs []kernelfeature.Feature
	// Keys are the plugin's own keys of a working config (master, vlanId, ...), over
	// the Env's Config; without "master", the plugin has none to lose.
	Keys map[string]any
	// BadInput are refused in-process, ExecdBadInput through the binary.
	BadInput, ExecdBadInput []BadInput
	// LibcniKeys and LibcniCapabilityArgs are added for the libcni run, whose ADD
	// result LibcniResult checks for the plugin's own parts (nil: nothing more).
	LibcniKeys, LibcniCapabilityArgs map[string]any
	LibcniResult                     func(t *testing.T, res *types100.Result)
	// InContainer, for a plugin that takes linkInContainer, checks what is its own of the
	// link it made on a master inside the container (nil: the plugin has no
	// linkInContainer).
	InContainer func(t *testing.T, l netlink.Link)
	// MasterFromDefaultRoute says that the plugin's master, when the config names none,
	// is the interface of the host's default route (macvlan, ipvlan).
	MasterFromDefaultRoute bool
}

// New makes the Env of a test that creates the plugin's link: it skips where the
// kernel lacks the link type.
func (s Suite) New(t *testing.T) *Env {
	t.Helper()
	for _, f := range s.Needs {
		kernelfeature.Require(t, f)
	}
	return s.AnyKernel(t)
}

// AnyKernel makes the Env of a test that is over before any link is made, so that it
// runs on every kernel.
func (s Suite) AnyKernel(t *testing.T) *Env {
	t.Helper()
	return New(t, s.Plugin())
}

// Run runs the suite's tests as parallel subtests of t; the test of a kernel without
// the link type only for a plugin that Needs a feature.
func (s Suite) Run(t *testing.T) {
	tests := map[string]func(*testing.T){
		"DelIsIdempotent":                                   s.DelIsIdempotent,
		"FailedAddLeavesNoLinkAndNoReservation":             s.FailedAddLeavesNoLinkAndNoReservation,
		"BadInputIsRefusedNamingTheFieldAndLeavesNothing":   s.BadInputIsRefusedNamingTheFieldAndLeavesNothing,
		"ExecdBadInputGivesTheCodeAndFieldAndLeavesNothing": s.ExecdBadInputGivesTheCodeAndFieldAndLeavesNothing,
		"BrokenIPAMSectionIsRefusedBeforeTheLink":           s.BrokenIPAMSectionIsRefusedBeforeTheLink,
		"LibcniAddCheckDelDel":                              s.LibcniAddCheckDelDel,
	}
	if len(s.Needs) > 0 {
		tests["KernelWithoutTheLinkIsTryAgainLater"] = s.KernelWithoutTheLinkIsTryAgainLater
	}
	if s.MasterFromDefaultRoute {
		tests["MasterDefaultsToTheInterfaceOfTheDefaultRoute"] = s.MasterDefaultsToTheInterfaceOfTheDefaultRoute
	}
	if s.InContainer != nil {
		tests["LinkInContainerUsesAMasterInsideTheContainer"] = s.LinkInContainerUsesAMasterInsideTheContainer
	}
	for name, test := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t)
		})
	}
}

// Config is the Env's config with the suite's keys, then keys over them; a nil value
// removes a key.
func (s Suite) Config(e *Env, keys map[string]any) []byte {
	e.T.Helper()
	return e.ConfigOf(e.Plugin.Name, map[string]any{"ipam": e.HostLocal(Subnet)}, plugintest.Merged(s.Keys, keys))
}

// DelIsIdempotent: DEL succeeds however often a runtime repeats it, and whatever is
// already gone (the container's namespace, the master, CNI_NETNS itself), and it
// releases the address each time.
func (s Suite) DelIsIdempotent(t *testing.T) {
	t.Run("twice", func(t *testing.T) {
		t.Parallel()
		e := s.New(t)
		conf := s.Config(e, nil)
		c := e.Add(conf)
		require.NoError(t, e.Del(c, conf))
		require.NoError(t, e.Del(c, conf))
		e.AssertNothingLeft(t, c)
		// What DEL removed is gone for CHECK too: the attachment no longer exists.
		assert.Error(t, e.Check(c, conf), "CHECK after DEL")
	})
	t.Run("netns gone", func(t *testing.T) {
		t.Parallel()
		e := s.New(t)
		conf := s.Config(e, nil)
		c := e.Add(conf)
		c.NS.Close()
		require.NoError(t, e.Del(c, conf))
		assert.Empty(t, e.Reservations())
		// A runtime retries DEL of a gone namespace too.
		require.NoError(t, e.Del(c, conf), "DEL again")
		assert.Equal(t, []string{"lo", Master}, plugintest.Links(t, e.Host))
	})
	if _, ok := s.Keys["master"]; ok {
		t.Run("master gone", func(t *testing.T) {
			t.Parallel()
			e := s.New(t)
			conf := s.Config(e, nil)
			c := e.Add(conf)
			h := e.Host.Handle(t)
			m, err := h.LinkByName(Master)
			require.NoError(t, err)
			require.NoError(t, h.LinkDel(m))
			require.NoError(t, e.Del(c, conf))
			assert.Equal(t, []string{"lo"}, plugintest.Links(t, c.NS))
			assert.Empty(t, e.Reservations())
		})
	}
	t.Run("CNI_NETNS empty still releases the address", func(t *testing.T) {
		t.Parallel()
		e := s.New(t)
		conf := s.Config(e, nil)
		c := e.Add(conf)
		require.Len(t, e.Reservations(), 1)
		_, err := e.Invoke(skel.CmdDel, c.ID, "", conf)
		require.NoError(t, err)
		assert.Empty(t, e.Reservations())
		// The link is still in the namespace DEL did not get; a DEL that names it
		// then removes it, though the address is already released.
		assert.Equal(t, []string{"eth0", "lo"}, plugintest.Links(t, c.NS))
		require.NoError(t, e.Del(c, conf))
		e.AssertNothingLeft(t, c)
	})
}

// FailedAddLeavesNoLinkAndNoReservation: an ADD that fails after the link and the
// reservation exist (a route through a gateway outside every subnet) undoes both.
func (s Suite) FailedAddLeavesNoLinkAndNoReservation(t *testing.T) {
	e := s.New(t)
	ipam := e.HostLocal(Subnet)
	ipam["routes"] = []any{map[string]any{"dst": "10.200.0.0/16", "gw": "192.0.2.1"}}
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, s.Config(e, map[string]any{"ipam": ipam}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "192.0.2.1")
	e.AssertNothingLeft(t, c)
}

// BadInput is one ADD the plugin must refuse before it makes anything.
type BadInput struct {
	Name string
	// Keys are laid over the suite's keys; a nil value removes one.
	Keys map[string]any
	// Prev is the config's prevResult, when not nil.
	Prev *result.Result
	// CNIArgs is CNI_ARGS.
	CNIArgs string
	// Code is the CNI error's code, CodeInvalidConfig when 0.
	Code uint
	// Field is what the error must name.
	Field string
}

func (b BadInput) code() uint {
	if b.Code == 0 {
		return cnierror.CodeInvalidConfig
	}
	return b.Code
}

func (s Suite) badConfig(t *testing.T, e *Env, b BadInput) []byte {
	conf := s.Config(e, b.Keys)
	if b.Prev != nil {
		conf = plugintest.WithPrev(t, conf, b.Prev)
	}
	return conf
}

// BadInputIsRefusedNamingTheFieldAndLeavesNothing runs each case in-process: a CNI
// error with its code naming its field, and nothing left in the container, the host
// or host-local. These run on any kernel.
func (s Suite) BadInputIsRefusedNamingTheFieldAndLeavesNothing(t *testing.T) {
	for _, b := range s.BadInput {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			e := s.AnyKernel(t)
			c := e.NewContainer()
			_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, s.badConfig(t, e, b), b.CNIArgs)
			require.Error(t, err)
			assert.Equal(t, b.code(), plugintest.Code(err), err.Error())
			assert.Contains(t, err.Error(), b.Field)
			e.AssertNothingLeft(t, c)
		})
	}
}

// ExecdBadInputGivesTheCodeAndFieldAndLeavesNothing runs each case through the binary,
// as a runtime would: the CNI error on stdout with its code naming its field, and
// nothing left behind.
func (s Suite) ExecdBadInputGivesTheCodeAndFieldAndLeavesNothing(t *testing.T) {
	e := s.AnyKernel(t)
	dir := e.PluginDir()
	for _, b := range s.ExecdBadInput {
		t.Run(b.Name, func(t *testing.T) {
			c := e.NewContainer()
			o := plugintest.Exec(t, e.Host, plugintest.Call{Bin: filepath.Join(dir, e.Plugin.Name), Command: skel.CmdAdd,
				ContainerID: c.ID, Netns: c.NS.Path, IfName: "eth0", Args: b.CNIArgs, Config: s.badConfig(t, e, b)})
			plugintest.AssertFailed(t, o, b.code(), b.Field)
			e.AssertNothingLeft(t, c)
		})
	}
}

// BrokenIPAMSectionIsRefusedBeforeTheLink: an ipam section IPAM would refuse is code 7
// naming its field before the link is made (attachment.CheckIPAM), on any kernel: on
// one without the link type, the refusal is the config's, not "try again later".
func (s Suite) BrokenIPAMSectionIsRefusedBeforeTheLink(t *testing.T) {
	e := s.AnyKernel(t)
	for name, ipam := range map[string]map[string]any{
		"ipam.ranges[0]": {"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": "10.0.0.0/33"}}}},
		"ipam.ranges":    {"type": "host-local", "ranges": []any{}},
	} {
		c := e.NewContainer()
		_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, s.Config(e, map[string]any{"ipam": ipam}))
		require.Error(t, err)
		assert.Equal(t, cnierror.CodeInvalidConfig, plugintest.Code(err), "%v", err)
		assert.Contains(t, err.Error(), name)
		e.AssertNothingLeft(t, c)
	}
}

// KernelWithoutTheLinkIsTryAgainLater: on a kernel without the link type (this
// machine's, for most of them), ADD says so with code 11 naming the plugin's link type,
// and leaves nothing: the reservation is never made, as the link comes first.
func (s Suite) KernelWithoutTheLinkIsTryAgainLater(t *testing.T) {
	missing := false
	for _, f := range s.Needs {
		ok, err := kernelfeature.Has(f)
		require.NoError(t, err)
		missing = missing || !ok
	}
	if !missing {
		t.Skip("the kernel supports the link type")
	}
	e := s.AnyKernel(t)
	c := e.NewContainer()
	_, err := e.Invoke(skel.CmdAdd, c.ID, c.NS.Path, s.Config(e, nil))
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeTryAgainLater, plugintest.Code(err))
	assert.Contains(t, err.Error(), e.Plugin.Name)
	e.AssertNothingLeft(t, c)
}

// LibcniAddCheckDelDel drives a one-plugin conflist of the suite's keys (with
// host-local on Subnet) through libcni: ADD gives one interface in the container's
// namespace, CHECK and both DELs succeed and leave nothing.
func (s Suite) LibcniAddCheckDelDel(t *testing.T) {
	e := s.New(t)
	c := e.NewContainer()
	plugin := plugintest.Merged(map[string]any{"type": e.Plugin.Name, "ipam": e.HostLocal(Subnet)}, plugintest.Merged(s.Keys, s.LibcniKeys))
	list, err := json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "testnet", "plugins": []any{plugin}})
	require.NoError(t, err)
	run := e.Libcni(string(list), c, s.LibcniCapabilityArgs)
	require.NoError(t, run.AddErr)
	require.Len(t, run.Result.Interfaces, 1)
	assert.Equal(t, c.NS.Path, run.Result.Interfaces[0].Sandbox)
	assert.NoError(t, run.CheckErr)
	assert.NoError(t, run.DelErr)
	assert.NoError(t, run.Del2Err, "DEL twice")
	e.AssertNothingLeft(t, c)
	if s.LibcniResult != nil {
		s.LibcniResult(t, run.Result)
	}
}

// LinkInContainerUsesAMasterInsideTheContainer: with linkInContainer, master names a
// link of the container's namespace, and the plugin's link is made on it there; DEL
// leaves that master, and the host's is never touched.
func (s Suite) LinkInContainerUsesAMasterInsideTheContainer(t *testing.T) {
	e := s.New(t)
	c := e.NewContainer()
	master := e.ContainerMaster(c, "10.91.0.2/24", "10.91.0.1/24")
	conf := s.Config(e, map[string]any{"master": ContainerMasterName, "linkInContainer": true,
		"ipam": e.HostLocal("10.91.0.0/24")})
	e.AddTo(c, conf)
	l := plugintest.LinkIn(t, c.NS, "eth0")
	require.NotNil(t, l, "eth0 in the container")
	assert.Equal(t, master.Attrs().Index, l.Attrs().ParentIndex)
	s.InContainer(t, l)
	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Del(c, conf))
	assert.Equal(t, []string{ContainerMasterName, "lo"}, plugintest.Links(t, c.NS))
	assert.Equal(t, []string{"lo", Master}, plugintest.Links(t, e.Host))
	assert.Empty(t, e.Reservations())
	assert.Error(t, e.Check(c, conf), "CHECK after DEL")
}

// MasterDefaultsToTheInterfaceOfTheDefaultRoute: a config without master gets the link
// on the interface of the host's default route, and the container reaches the network
// through it. Unlike the reference, DEL does not resolve the default route again: it
// succeeds once the route is gone.
func (s Suite) MasterDefaultsToTheInterfaceOfTheDefaultRoute(t *testing.T) {
	e := s.New(t)
	def := e.DefaultRouteViaMaster()
	conf := s.Config(e, map[string]any{"master": nil})
	c := e.Add(conf)
	l := plugintest.LinkIn(t, c.NS, "eth0")
	require.NotNil(t, l, "eth0 in the container")
	assert.Equal(t, e.MasterLink().Attrs().Index, l.Attrs().ParentIndex)
	assert.NoError(t, Reach(t, c.NS, e.Peer, PeerAddr))
	require.NoError(t, e.Check(c, conf))
	require.NoError(t, e.Host.Handle(t).RouteDel(def))
	require.NoError(t, e.Del(c, conf))
	e.AssertNothingLeft(t, c)
}
