package attachment_test

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/core/rollback"
	"github.com/cnikit/cni/internal/host/link"
	"github.com/cnikit/cni/internal/plugins/attachment"
	"github.com/cnikit/cni/internal/result"
	"github.com/cnikit/cni/internal/spec/skel"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func code(t *testing.T, err error) uint {
	t.Helper()
	var cerr *cnierror.Error
	require.ErrorAs(t, err, &cerr)
	return cerr.Code
}

// With validateIPAM a broken ipam section is refused before the namespaces are looked
// at; without, the missing container comes first (code 3).
func TestOpenValidatesIPAMFirstWhenAsked(t *testing.T) {
	req := &skel.Request{Args: skel.Args{Netns: filepath.Join(t.TempDir(), "gone"), Path: []string{t.TempDir()}}}
	req.Net.IPAM.Type = "no-such-ipam"
	_, err := attachment.Open(req, true)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "CNI_NETNS")
	_, err = attachment.Open(req, false)
	assert.Equal(t, cnierror.CodeUnknownContainer, code(t, err))
}

// AddVeth makes the pair with its container end inside the container and its deletion
// as the undo; a name taken in the container is code 4. VethEnds reports both ends.
func TestAddVethAndItsUndo(t *testing.T) {
	testns.RequireRoot(t)
	host, cont := testns.NewWithLoopback(t), testns.New(t)
	req := &skel.Request{Args: skel.Args{Netns: cont.Path, IfName: "eth0"}}
	host.Run(t, func() error {
		ns, err := attachment.Open(req, false)
		require.NoError(t, err)
		defer ns.Close()
		var undo rollback.Stack
		veth, err := ns.AddVeth(link.VethOptions{IfName: "eth0", MTU: 1400}, "veth", &undo)
		require.NoError(t, err)
		hostEnd, contEnd := attachment.VethEnds(req, veth)
		assert.Equal(t, result.Interface{Name: veth.Host.Attrs().Name, Mac: veth.Host.Attrs().HardwareAddr.String(), MTU: 1400}, hostEnd)
		assert.Equal(t, result.Interface{Name: "eth0", Mac: veth.Container.Attrs().HardwareAddr.String(), MTU: 1400, Sandbox: cont.Path}, contEnd)
		_, err = ns.Host.ByName(hostEnd.Name)
		require.NoError(t, err, "host end")

		_, err = ns.AddVeth(link.VethOptions{IfName: "eth0"}, "veth again", &undo)
		assert.Equal(t, cnierror.CodeInvalidEnv, code(t, err))

		require.NoError(t, undo.Undo())
		_, err = ns.Cont.ByName("eth0")
		assert.True(t, link.IsNotFound(err), "container end after undo: %v", err)
		_, err = ns.Host.ByName(hostEnd.Name)
		assert.True(t, link.IsNotFound(err), "host end after undo: %v", err)
		return nil
	})
}

// DelVeth without an IPAM type only deletes the veth, and finds nothing to do the
// second time.
func TestDelVethDeletesTheVethOnce(t *testing.T) {
	testns.RequireRoot(t)
	host, cont := testns.NewWithLoopback(t), testns.New(t)
	req := &skel.Request{Args: skel.Args{Netns: cont.Path, IfName: "eth0"}}
	host.Run(t, func() error {
		ns, err := attachment.Open(req, false)
		require.NoError(t, err)
		defer ns.Close()
		var undo rollback.Stack
		_, err = ns.AddVeth(link.VethOptions{IfName: "eth0"}, "veth", &undo)
		require.NoError(t, err)
		require.NoError(t, errors.Join(attachment.DelVeth(req, nil)...), "no IPAM type: the veth's deletion alone")
		_, err = ns.Cont.ByName("eth0")
		assert.True(t, link.IsNotFound(err), "container end after DelVeth: %v", err)
		assert.NoError(t, errors.Join(attachment.DelVeth(req, nil)...))
		return nil
	})
}

// Report points every address at the last interface, the container's, and takes the
// config's dns over IPAM's only when the config sets one.
func TestReport(t *testing.T) {
	idx := 0
	addrs := &result.Result{
		IPs:    []result.IPConfig{{Address: netip.MustParsePrefix("10.1.0.2/24"), Interface: &idx}},
		Routes: []result.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0")}},
		DNS:    result.DNS{Nameservers: []string{"10.1.0.1"}},
	}
	req := &skel.Request{Net: skel.NetConf{CNIVersion: "1.1.0"}}
	res := attachment.Report(req, addrs, result.Interface{Name: "veth1"}, result.Interface{Name: "eth0", Sandbox: "/x"})
	require.Len(t, res.Interfaces, 2)
	require.Len(t, res.IPs, 1)
	assert.Equal(t, 1, *res.IPs[0].Interface)
	assert.Equal(t, 0, idx, "the IPAM result is left as it was")
	assert.Equal(t, "1.1.0", res.CNIVersion)
	assert.Equal(t, addrs.Routes, res.Routes)
	assert.Equal(t, addrs.DNS, res.DNS)

	req.Net.DNS = &skel.DNS{}
	assert.Equal(t, addrs.DNS, attachment.Report(req, addrs, result.Interface{Name: "eth0"}).DNS, "an empty dns object")
	req.Net.DNS = &skel.DNS{Nameservers: []string{"9.9.9.9"}}
	assert.Equal(t, result.DNS{Nameservers: []string{"9.9.9.9"}}, attachment.Report(req, addrs, result.Interface{Name: "eth0"}).DNS)
	assert.Empty(t, attachment.Report(req, nil, result.Interface{Name: "eth0"}).IPs)
}

// CheckHead without a prevResult is code 7 (no IPAM type: nothing to ask first).
func TestCheckHeadRequiresPrevResult(t *testing.T) {
	req := &skel.Request{}
	assert.Equal(t, cnierror.CodeInvalidConfig, code(t, attachment.CheckHead(req)))
	req.PrevResult = &result.Result{}
	assert.NoError(t, attachment.CheckHead(req))
}

// DelIPAM asks IPAM only when the config names a type (one that cannot run says so on
// stderr, and succeeds).
func TestDelIPAMOnlyWithAType(t *testing.T) {
	var stderr bytes.Buffer
	req := &skel.Request{Args: skel.Args{Path: []string{t.TempDir()}}, Stderr: &stderr}
	assert.NoError(t, attachment.DelIPAM(req))
	assert.Empty(t, stderr.String())
	req.Net.IPAM.Type = "no-such-ipam"
	assert.NoError(t, attachment.DelIPAM(req))
	assert.Contains(t, stderr.String(), "ipam no-such-ipam: DEL")
}

// LoadPrev gives load's error first, then the missing prevResult's (code 7, naming the
// command), else the config.
func TestLoadPrev(t *testing.T) {
	type conf struct{ n int }
	bad := errors.New("bad config")
	load := func(*skel.Request) (*conf, error) { return &conf{n: 1}, nil }
	refuse := func(*skel.Request) (*conf, error) { return nil, bad }

	req := &skel.Request{}
	_, err := attachment.LoadPrev(req, "REPAIR", refuse)
	assert.ErrorIs(t, err, bad)
	_, err = attachment.LoadPrev(req, "REPAIR", load)
	assert.Equal(t, cnierror.CodeInvalidConfig, code(t, err))
	assert.ErrorContains(t, err, "prevResult: required for REPAIR")

	req.PrevResult = &result.Result{}
	c, err := attachment.LoadPrev(req, "CHECK", load)
	require.NoError(t, err)
	assert.Equal(t, 1, c.n)
}
