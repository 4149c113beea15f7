package netfilter

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/testbed/testns"
)

// elementFixture makes table inet elemtest with a verdict map of n IPv4 addresses
// (10.0.x.y), each jumping to chain "target" with comment "owner-<i>", and a plain set.
func elementFixture(t testing.TB, host *testns.NS, n int) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "elemtest"})
		c.AddChain(&nftables.Chain{Table: tbl, Name: "target"})
		vmap := &nftables.Set{Table: tbl, Name: "vmap", KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict, IsMap: true}
		var elems []nftables.SetElement
		for i := 0; i < n; i++ {
			elems = append(elems, nftables.SetElement{
				Key:         fixtureAddr(i).AsSlice(),
				VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: "target"},
				Comment:     fmt.Sprintf("owner-%d", i),
			})
		}
		if err := c.AddSet(vmap, elems); err != nil {
			return err
		}
		plain := &nftables.Set{Table: tbl, Name: "plain", KeyType: nftables.TypeIPAddr}
		if err := c.AddSet(plain, []nftables.SetElement{{Key: fixtureAddr(0).AsSlice()}}); err != nil {
			return err
		}
		return c.Flush()
	})
}

func fixtureAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i%250 + 1)})
}

func TestGetElementFindsOneElementWithItsCommentAndVerdict(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	elementFixture(t, host, 600)
	// Assertions stay outside Run: FailNow inside it would end the namespace goroutine.
	got := map[int]Element{}
	var plain Element
	host.Run(t, func() error {
		for _, i := range []int{0, 1, 299, 599} {
			e, err := GetElement(nftables.TableFamilyINet, "elemtest", "vmap", fixtureAddr(i).AsSlice())
			if err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
			got[i] = e
		}
		var err error
		plain, err = GetElement(nftables.TableFamilyINet, "elemtest", "plain", fixtureAddr(0).AsSlice())
		return err
	})
	for i, e := range got {
		require.Equal(t, Element{Comment: fmt.Sprintf("owner-%d", i), VerdictChain: "target"}, e, "element %d", i)
	}
	require.Len(t, got, 4)
	require.Equal(t, Element{}, plain, "a plain set's element has no comment and no verdict")
}

func TestGetElementReportsMissingAsNotExist(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	elementFixture(t, host, 3)
	errs := map[string]error{}
	host.Run(t, func() error {
		for name, lookup := range map[string][3]string{
			"missing key":   {"elemtest", "vmap", "10.9.9.9"},
			"missing set":   {"elemtest", "nosuchset", "10.0.0.1"},
			"missing table": {"nosuchtable", "vmap", "10.0.0.1"},
		} {
			_, errs[name] = GetElement(nftables.TableFamilyINet, lookup[0], lookup[1], netip.MustParseAddr(lookup[2]).AsSlice())
		}
		return nil
	})
	require.Len(t, errs, 3)
	for name, err := range errs {
		require.Error(t, err, name)
		require.True(t, IsNotExist(err), "%s: %v", name, err)
	}
}

func TestGetElementLooksInTheCallersNamespaceOnly(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	elementFixture(t, host, 3)
	other := testns.New(t)
	var err error
	other.Run(t, func() error {
		_, err = GetElement(nftables.TableFamilyINet, "elemtest", "vmap", fixtureAddr(0).AsSlice())
		return nil
	})
	require.True(t, IsNotExist(err), "another namespace has no such table: %v", err)
}

func BenchmarkGetElementOf600(b *testing.B) {
	testns.RequireRoot(b)
	host, err := testns.Create()
	require.NoError(b, err)
	b.Cleanup(host.Close)
	elementFixture(b, host, 600)
	host.Run(b, func() error {
		for b.Loop() {
			if _, err := GetElement(nftables.TableFamilyINet, "elemtest", "vmap", fixtureAddr(433).AsSlice()); err != nil {
				return err
			}
		}
		return nil
	})
}
