package kernelfeature

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// createAndCheck builds a link in a throwaway namespace and hands the
// kernel's view of it back to check, so each test proves the feature works
// beyond the probe's bare "add succeeded".
func createAndCheck(t *testing.T, build func(h *netlink.Handle) (netlink.Link, error), check func(t *testing.T, got netlink.Link)) {
	t.Helper()
	var got netlink.Link
	err := inThrowawayNetns(func(h *netlink.Handle) error {
		link, err := build(h)
		if err != nil {
			return err
		}
		if err := h.LinkAdd(link); err != nil {
			return err
		}
		got, err = h.LinkByName(link.Attrs().Name)
		return err
	})
	require.NoError(t, err)
	check(t, got)
}

func stacked(build func(parent int) netlink.Link) func(h *netlink.Handle) (netlink.Link, error) {
	return func(h *netlink.Handle) (netlink.Link, error) {
		parent, err := addVethParent(h, "lower0", "lowerpeer0")
		if err != nil {
			return nil, err
		}
		return build(parent), nil
	}
}

func standalone(link netlink.Link) func(h *netlink.Handle) (netlink.Link, error) {
	return func(*netlink.Handle) (netlink.Link, error) { return link, nil }
}

func TestDummyLinkCanBeCreated(t *testing.T) {
	Require(t, Dummy)
	createAndCheck(t, standalone(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "dummy0"}}),
		func(t *testing.T, got netlink.Link) {
			assert.Equal(t, "dummy", got.Type())
		})
}

func TestVLANLinkCanBeCreated(t *testing.T) {
	Require(t, VLAN)
	createAndCheck(t, stacked(func(parent int) netlink.Link {
		return &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "vlan100", ParentIndex: parent}, VlanId: 100}
	}), func(t *testing.T, got netlink.Link) {
		vlan, ok := got.(*netlink.Vlan)
		require.True(t, ok, "got %T", got)
		assert.Equal(t, 100, vlan.VlanId)
	})
}

func TestIPVLANLinkCanBeCreated(t *testing.T) {
	Require(t, IPVLAN)
	createAndCheck(t, stacked(func(parent int) netlink.Link {
		return &netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "ipvl0", ParentIndex: parent}, Mode: netlink.IPVLAN_MODE_L3}
	}), func(t *testing.T, got netlink.Link) {
		ipvlan, ok := got.(*netlink.IPVlan)
		require.True(t, ok, "got %T", got)
		assert.Equal(t, netlink.IPVLAN_MODE_L3, ipvlan.Mode)
	})
}

func TestMacvlanLinkCanBeCreated(t *testing.T) {
	Require(t, Macvlan)
	createAndCheck(t, stacked(func(parent int) netlink.Link {
		return &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "macvl0", ParentIndex: parent}, Mode: netlink.MACVLAN_MODE_PRIVATE}
	}), func(t *testing.T, got netlink.Link) {
		macvlan, ok := got.(*netlink.Macvlan)
		require.True(t, ok, "got %T", got)
		assert.Equal(t, netlink.MACVLAN_MODE_PRIVATE, macvlan.Mode)
	})
}

func TestVRFLinkCanBeCreated(t *testing.T) {
	Require(t, VRF)
	createAndCheck(t, standalone(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "vrf-blue"}, Table: 1234}),
		func(t *testing.T, got netlink.Link) {
			vrf, ok := got.(*netlink.Vrf)
			require.True(t, ok, "got %T", got)
			assert.Equal(t, uint32(1234), vrf.Table)
		})
}

func TestBondLinkCanBeCreated(t *testing.T) {
	Require(t, Bond)
	bond := netlink.NewLinkBond(netlink.LinkAttrs{Name: "bond0"})
	bond.Mode = netlink.BOND_MODE_ACTIVE_BACKUP
	createAndCheck(t, standalone(bond), func(t *testing.T, got netlink.Link) {
		b, ok := got.(*netlink.Bond)
		require.True(t, ok, "got %T", got)
		assert.Equal(t, netlink.BOND_MODE_ACTIVE_BACKUP, b.Mode)
	})
}

func TestBridgeWithVLANFilteringCanBeCreated(t *testing.T) {
	Require(t, BridgeVLANFiltering)
	on := true
	createAndCheck(t, standalone(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-vf"}, VlanFiltering: &on}),
		func(t *testing.T, got netlink.Link) {
			br, ok := got.(*netlink.Bridge)
			require.True(t, ok, "got %T", got)
			require.NotNil(t, br.VlanFiltering)
			assert.True(t, *br.VlanFiltering)
		})
}

func TestHasAnswersEveryFeatureWithoutError(t *testing.T) {
	for f := range featureCount {
		t.Run(f.String(), func(t *testing.T) {
			_, err := Has(f)
			assert.NoError(t, err)
		})
	}
}

func TestHasRejectsUnknownFeature(t *testing.T) {
	_, err := Has(featureCount)
	assert.Error(t, err)
}

func TestHasReportsVethParentKindsAsSupported(t *testing.T) {
	// macvlan is in every kernel the project tests on (this machine's
	// included), so its probe must say yes; a broken probe that always
	// answered "missing" would otherwise turn every feature test into a skip.
	ok, err := Has(Macvlan)
	require.NoError(t, err)
	assert.True(t, ok)
}

// verdictRecorder stands in for testing.TB to watch what Require decides
// without ending the calling test.
type verdictRecorder struct {
	testing.TB
	skipped, failed bool
}

func (r *verdictRecorder) Helper()               {}
func (r *verdictRecorder) Skipf(string, ...any)  { r.skipped = true }
func (r *verdictRecorder) Fatalf(string, ...any) { r.failed = true }

func TestRequireVerdict(t *testing.T) {
	tests := []struct {
		name                    string
		ok                      bool
		err                     error
		fullKernel              bool
		wantSkipped, wantFailed bool
	}{
		{name: "present feature passes", ok: true},
		{name: "present feature passes in VM", ok: true, fullKernel: true},
		{name: "missing feature skips", wantSkipped: true},
		{name: "missing feature fails in VM", fullKernel: true, wantFailed: true},
		{name: "probe error fails", err: errors.New("boom"), wantFailed: true},
		{name: "probe error fails in VM", err: errors.New("boom"), fullKernel: true, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &verdictRecorder{TB: t}
			decide(rec, VLAN, tt.ok, tt.err, tt.fullKernel)
			assert.Equal(t, tt.wantSkipped, rec.skipped, "skipped")
			assert.Equal(t, tt.wantFailed, rec.failed, "failed")
		})
	}
}

func TestFeatureNamesAreReadable(t *testing.T) {
	assert.Equal(t, "802.1Q vlan links", VLAN.String())
	assert.Equal(t, "Feature(99)", Feature(99).String())
}
