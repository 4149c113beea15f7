package linkid

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestMatchesProvesTheSameInterface(t *testing.T) {
	rec := ID{BootID: "b1", Cookie: 7, Dev: 4, Ino: 100, IfIndex: 3, HWAddr: "02:00:00:00:00:01"}
	noCookie := rec
	noCookie.Cookie = 0
	old := ID{HWAddr: "02:00:00:00:00:01"}
	for name, c := range map[string]struct {
		want, got ID
		ok        bool
	}{
		"same":                       {rec, rec, true},
		"another boot":               {rec, with(rec, func(i *ID) { i.BootID = "b2" }), false},
		"another namespace (cookie)": {rec, with(rec, func(i *ID) { i.Cookie = 8 }), false},
		"another namespace (inode)":  {noCookie, with(noCookie, func(i *ID) { i.Ino = 101 }), false},
		"an inode reused":            {rec, with(rec, func(i *ID) { i.Cookie = 9 }), false},
		"another link":               {rec, with(rec, func(i *ID) { i.IfIndex = 4 }), false},
		"a MAC a later plugin set":   {rec, with(rec, func(i *ID) { i.HWAddr = "02:00:00:00:00:99" }), true},
		"a MAC changed, no cookie":   {noCookie, with(noCookie, func(i *ID) { i.HWAddr = "02:00:00:00:00:99" }), false},
		"an old record, same MAC":    {old, rec, true},
		"an old record, another MAC": {old, with(rec, func(i *ID) { i.HWAddr = "02:00:00:00:00:99" }), false},
		"a record without a MAC":     {ID{}, rec, false},
		"the MAC in capitals":        {with(rec, func(i *ID) { i.HWAddr = "02:00:00:00:00:AB" }), with(rec, func(i *ID) { i.HWAddr = "02:00:00:00:00:ab" }), true},
	} {
		err := c.want.matches(c.got)
		assert.Equal(t, c.ok, err == nil, "%s: %v", name, err)
	}
}

func with(id ID, change func(*ID)) ID {
	change(&id)
	return id
}

// Enter runs nothing where the interface is not the recorded one, nor in the caller's
// own namespace even for a first use, and reports what it saw where it is.
func TestEnterActsOnlyOnTheRecordedInterface(t *testing.T) {
	testns.RequireRoot(t)
	host, a, b := testns.New(t), testns.New(t), testns.New(t)
	testns.Veth(t, a, "eth0", nil, host, "pa", nil)
	testns.Veth(t, b, "eth0", nil, host, "pb", nil)
	testns.Veth(t, host, "own0", nil, a, "peer0", nil)
	var self Host
	host.Run(t, func() (err error) { self, err = Self(); return err })

	ran := 0
	count := func(netlink.Link) error { ran++; return nil }
	got, err := Target{Netns: a.Path, IfName: "eth0", Host: self}.Enter(nil, count)
	require.NoError(t, err)
	assert.Equal(t, 1, ran)
	assert.Equal(t, self.BootID, got.BootID)
	assert.NotZero(t, got.Cookie, "this kernel has netns cookies")
	assert.NotZero(t, got.Ino)
	assert.NotEmpty(t, got.HWAddr)

	_, err = Target{Netns: a.Path, IfName: "eth0", Host: self}.Enter(&got, count)
	require.NoError(t, err, "the same interface again")
	_, err = Target{Netns: b.Path, IfName: "eth0", Host: self}.Enter(&got, count)
	assert.ErrorIs(t, err, ErrGone, "eth0 of another namespace")
	_, err = Target{Netns: a.Path, IfName: "peer0", Host: self}.Enter(&got, count)
	assert.ErrorIs(t, err, ErrGone, "another link of the namespace")
	_, err = Target{Netns: host.Path, IfName: "own0", Host: self}.Enter(nil, count)
	assert.ErrorIs(t, err, ErrOwnNetns, "the caller's own namespace, even on first use")
	_, err = Target{Netns: a.Path, IfName: "nope0", Host: self}.Enter(nil, count)
	assert.ErrorIs(t, err, ErrGone)
	_, err = Target{Netns: "/nonexistent/ns", IfName: "eth0", Host: self}.Enter(nil, count)
	assert.ErrorIs(t, err, ErrGone)
	assert.Equal(t, 2, ran, "fn ran only on the recorded interface")

	failing := errors.New("fn failed")
	_, err = Target{Netns: a.Path, IfName: "eth0", Host: self}.Enter(&got, func(netlink.Link) error { return failing })
	assert.ErrorIs(t, err, failing)
}
