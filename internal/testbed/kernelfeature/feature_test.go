package kernelfeature

import (
	"errors"
	"os"
	"path/filepath"
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

// as hands check a link the kernel gave back, which must be a T.
func as[T netlink.Link](check func(t *testing.T, l T)) func(*testing.T, netlink.Link) {
	return func(t *testing.T, got netlink.Link) {
		l, ok := got.(T)
		require.True(t, ok, "got %T", got)
		check(t, l)
	}
}

func activeBackupBond() netlink.Link {
	bond := netlink.NewLinkBond(netlink.LinkAttrs{Name: "bond0"})
	bond.Mode = netlink.BOND_MODE_ACTIVE_BACKUP
	return bond
}

// TestEachFeaturesLinkCanBeCreated: where a feature is there, a link of its kind is made
// and the kernel gives back what it was asked for.
func TestEachFeaturesLinkCanBeCreated(t *testing.T) {
	on := true
	for _, tc := range []struct {
		feature Feature
		build   func(h *netlink.Handle) (netlink.Link, error)
		check   func(t *testing.T, got netlink.Link)
	}{
		{Dummy, standalone(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "dummy0"}}), func(t *testing.T, got netlink.Link) {
			assert.Equal(t, "dummy", got.Type())
		}},
		{VLAN, stacked(func(parent int) netlink.Link {
			return &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "vlan100", ParentIndex: parent}, VlanId: 100}
		}), as(func(t *testing.T, l *netlink.Vlan) { assert.Equal(t, 100, l.VlanId) })},
		{IPVLAN, stacked(func(parent int) netlink.Link {
			return &netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: "ipvl0", ParentIndex: parent}, Mode: netlink.IPVLAN_MODE_L3}
		}), as(func(t *testing.T, l *netlink.IPVlan) { assert.Equal(t, netlink.IPVLAN_MODE_L3, l.Mode) })},
		{Macvlan, stacked(func(parent int) netlink.Link {
			return &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "macvl0", ParentIndex: parent}, Mode: netlink.MACVLAN_MODE_PRIVATE}
		}), as(func(t *testing.T, l *netlink.Macvlan) { assert.Equal(t, netlink.MACVLAN_MODE_PRIVATE, l.Mode) })},
		{VRF, standalone(&netlink.Vrf{LinkAttrs: netlink.LinkAttrs{Name: "vrf-blue"}, Table: 1234}),
			as(func(t *testing.T, l *netlink.Vrf) { assert.Equal(t, uint32(1234), l.Table) })},
		{Bond, standalone(activeBackupBond()),
			as(func(t *testing.T, l *netlink.Bond) { assert.Equal(t, netlink.BOND_MODE_ACTIVE_BACKUP, l.Mode) })},
		{BridgeVLANFiltering, standalone(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br-vf"}, VlanFiltering: &on}),
			as(func(t *testing.T, l *netlink.Bridge) {
				require.NotNil(t, l.VlanFiltering)
				assert.True(t, *l.VlanFiltering)
			})},
	} {
		t.Run(tc.feature.String(), func(t *testing.T) {
			Require(t, tc.feature)
			createAndCheck(t, tc.build, tc.check)
		})
	}
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
			decide(rec, VLAN, tt.ok, tt.err, tt.fullKernel, "")
			assert.Equal(t, tt.wantSkipped, rec.skipped, "skipped")
			assert.Equal(t, tt.wantFailed, rec.failed, "failed")
		})
	}
}

// A skip for a missing feature is noted with the package's directory and the top-level
// test, which make test-kernel then runs in its VM; nothing else is noted.
func TestRequireNotesEverySkipForTheVM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skips")
	t.Run("sub", func(t *testing.T) {
		decide(&verdictRecorder{TB: t}, VLAN, false, nil, false, dir)
		decide(&verdictRecorder{TB: t}, VRF, true, nil, false, dir)
		decide(&verdictRecorder{TB: t}, Bond, false, errors.New("boom"), false, dir)
		decide(&verdictRecorder{TB: t}, Bond, false, nil, true, dir)
	})
	cwd, err := os.Getwd()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(dir, "skips-*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one file per test process")
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, cwd+"\tTestRequireNotesEverySkipForTheVM\n", string(data))
}

func TestFeatureNamesAreReadable(t *testing.T) {
	assert.Equal(t, "802.1Q vlan links", VLAN.String())
	assert.Equal(t, "Feature(99)", Feature(99).String())
}
