package netfilter

import (
	"os/exec"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/testbed/testns"
)

func TestChooseHonoursExplicitSettings(t *testing.T) {
	b, err := Choose("backend", "nftables")
	require.NoError(t, err)
	assert.Equal(t, NFTables, b)
	_, err = Choose("ipMasqBackend", "ebtables")
	require.Error(t, err)
	assert.Equal(t, cnierror.CodeInvalidConfig, cnierror.Code(err))
	assert.Contains(t, err.Error(), "ipMasqBackend")
}

// An explicit setting wins over what the host uses: nftables named where the host keeps
// iptables rules is nftables.
func TestChooseExplicitWinsOverDetection(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	iptablesNFTTable(t, host)
	var b Backend
	host.Run(t, func() (err error) {
		b, err = Choose("backend", "nftables")
		return err
	})
	assert.Equal(t, NFTables, b)
}

// iptables named on a node without the iptables tools is nftables (Nomad names iptables
// for every node); with the tools it is iptables.
func TestChooseIPTablesWithoutTheToolsIsNFTables(t *testing.T) {
	testns.FakeIPTablesTools(t)
	b, err := Choose("ipMasqBackend", "iptables")
	require.NoError(t, err)
	assert.Equal(t, IPTables, b)
	t.Setenv("PATH", t.TempDir())
	b, err = Choose("ipMasqBackend", "iptables")
	require.NoError(t, err)
	assert.Equal(t, NFTables, b)
	assert.Equal(t, NFTables, Runnable(IPTables))
	assert.Equal(t, NFTables, Runnable(NFTables))
}

// detectIn runs Detect in the namespace; Assertions stay outside Run: FailNow inside it
// would end the namespace goroutine.
func detectIn(t *testing.T, host *testns.NS) (b Backend) {
	t.Helper()
	host.Run(t, func() error { b = Detect(); return nil })
	return b
}

// A fresh namespace holds no rules of the host's: nftables.
func TestDetectPrefersNFTablesInACleanNamespace(t *testing.T) {
	testns.RequireRoot(t)
	assert.Equal(t, NFTables, detectIn(t, testns.New(t)))
}

// Once the legacy iptables backend holds a table in the namespace, rules must go there,
// also for a caller without CAP_NET_ADMIN: /proc lists the legacy tables to root
// without any capability.
func TestDetectFollowsLegacyIPTablesInUse(t *testing.T) {
	testns.RequireFirewallBinaries(t, "iptables-legacy makes the legacy table")
	testns.RequireRoot(t)
	if _, err := exec.LookPath("iptables-legacy"); err != nil {
		t.Skip("iptables-legacy is not installed")
	}
	host := testns.New(t)
	_, err := host.Exec(t, "iptables-legacy", "-t", "nat", "-L")
	require.NoError(t, err)
	assert.Equal(t, IPTables, detectIn(t, host))
	var unprivileged Backend
	host.Run(t, func() error {
		return withoutCapNetAdmin(func() error { unprivileged = Detect(); return nil })
	})
	assert.Equal(t, IPTables, unprivileged, "without CAP_NET_ADMIN")
}

// iptablesNFTTable makes, over netlink, what `iptables -P FORWARD DROP` leaves with
// iptables-nft: table ip filter with base chain FORWARD, policy drop.
func iptablesNFTTable(t *testing.T, host *testns.NS) {
	t.Helper()
	iptablesNFTForward(t, host, nftables.ChainPolicyDrop, nil)
}

// iptablesNFTForward makes table ip filter, base chain FORWARD with policy and one rule
// of exprs (none when nil), and the chain CNI-FORWARD.
func iptablesNFTForward(t *testing.T, host *testns.NS, policy nftables.ChainPolicy, exprs []expr.Any) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"})
		fwd := c.AddChain(&nftables.Chain{Table: tbl, Name: "FORWARD", Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &policy})
		c.AddChain(&nftables.Chain{Table: tbl, Name: "CNI-FORWARD"})
		if exprs != nil {
			c.AddRule(&nftables.Rule{Table: tbl, Chain: fwd, Exprs: exprs})
		}
		return c.Flush()
	})
}

// The plugins' own iptables rules (jumps to CNI-* chains) are not the host's: a node
// whose iptables-nft tables hold only those stays nftables, one whose FORWARD also
// drops or holds a rule of its own is iptables.
func TestDetectTellsTheHostsIPTablesRulesFromThePluginsOwn(t *testing.T) {
	testns.RequireRoot(t)
	testns.FakeIPTablesTools(t)
	for _, tc := range []struct {
		name   string
		policy nftables.ChainPolicy
		rule   []expr.Any
		want   Backend
	}{
		{"empty, accepting", nftables.ChainPolicyAccept, nil, NFTables},
		{"a jump to CNI-FORWARD", nftables.ChainPolicyAccept, []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "CNI-FORWARD"}}, NFTables},
		{"policy drop", nftables.ChainPolicyDrop, nil, IPTables},
		{"a reject of the host's", nftables.ChainPolicyAccept, []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}, IPTables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := testns.New(t)
			iptablesNFTForward(t, host, tc.policy, tc.rule)
			assert.Equal(t, tc.want, detectIn(t, host))
		})
	}
}

// builtinChain makes, over netlink, table name of fam with base chain chain (policy
// accept) holding one rule of exprs, or none when nil.
func builtinChain(t *testing.T, host *testns.NS, fam nftables.TableFamily, table, chain string, hook *nftables.ChainHook, exprs []expr.Any) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tbl := c.AddTable(&nftables.Table{Family: fam, Name: table})
		c.AddChain(&nftables.Chain{Table: tbl, Name: "CNI-X"})
		accept := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Table: tbl, Name: chain, Type: nftables.ChainTypeFilter,
			Hooknum: hook, Priority: nftables.ChainPriorityMangle, Policy: &accept})
		if exprs != nil {
			c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: exprs})
		}
		return c.Flush()
	})
}

// Every built-in chain of every iptables table of both families is read, each chain
// by name: a rule of the host's counts wherever iptables can have put it, and a base
// chain that iptables cannot have made (FORWARD in table nat) or a regular chain with
// a built-in's name does not.
func TestDetectReadsEveryBuiltinChainOfTheIPTablesTables(t *testing.T) {
	testns.RequireRoot(t)
	testns.FakeIPTablesTools(t)
	drop := []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}}
	own := []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: "CNI-X"}}
	for _, tc := range []struct {
		name         string
		fam          nftables.TableFamily
		table, chain string
		hook         *nftables.ChainHook
		rule         []expr.Any
		want         Backend
	}{
		{"ip6 mangle OUTPUT drops", nftables.TableFamilyIPv6, "mangle", "OUTPUT", nftables.ChainHookOutput, drop, IPTables},
		{"ip raw PREROUTING drops", nftables.TableFamilyIPv4, "raw", "PREROUTING", nftables.ChainHookPrerouting, drop, IPTables},
		{"ip security INPUT drops", nftables.TableFamilyIPv4, "security", "INPUT", nftables.ChainHookInput, drop, IPTables},
		{"ip6 nat POSTROUTING jumps to CNI-X", nftables.TableFamilyIPv6, "nat", "POSTROUTING", nftables.ChainHookPostrouting, own, NFTables},
		{"ip nat FORWARD, no built-in of nat, drops", nftables.TableFamilyIPv4, "nat", "FORWARD", nftables.ChainHookForward, drop, NFTables},
		{"inet filter FORWARD drops: nft's, not iptables'", nftables.TableFamilyINet, "filter", "FORWARD", nftables.ChainHookForward, drop, NFTables},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := testns.New(t)
			builtinChain(t, host, tc.fam, tc.table, tc.chain, tc.hook, tc.rule)
			assert.Equal(t, tc.want, detectIn(t, host))
		})
	}
	t.Run("a regular chain named FORWARD", func(t *testing.T) {
		host := testns.New(t)
		nfttestApply(t, host, func(c *nftables.Conn) {
			tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "filter"})
			ch := c.AddChain(&nftables.Chain{Table: tbl, Name: "FORWARD"})
			c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: drop})
		})
		assert.Equal(t, NFTables, detectIn(t, host))
	})
}

// nfttestApply runs fn on a connection in host and sends what it queued (nfttest.Apply,
// which this package's own tests cannot import: nfttest imports it).
func nfttestApply(t *testing.T, host *testns.NS, fn func(c *nftables.Conn)) {
	t.Helper()
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		fn(c)
		return c.Flush()
	})
}

// Rules that iptables-nft keeps in nf_tables are the host's iptables rules: with the
// tools installed, iptables; without them there is no way to reach those rules, so
// nftables (a kube-proxy pod's own iptables on a node without any).
func TestDetectFollowsIPTablesNFTRulesOnlyWhereTheToolsAre(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	iptablesNFTTable(t, host)
	testns.FakeIPTablesTools(t)
	assert.Equal(t, IPTables, detectIn(t, host))
	t.Setenv("PATH", t.TempDir())
	require.False(t, IPTablesInstalled())
	assert.Equal(t, NFTables, detectIn(t, host), "no iptables tools in PATH")
}

// Native nftables rules (lower-case chains, in an inet or ip table) are not iptables
// rules.
func TestDetectKeepsNFTablesBesideNativeNFTRules(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	host.Run(t, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		for _, tbl := range []*nftables.Table{{Family: nftables.TableFamilyINet, Name: "filter"}, {Family: nftables.TableFamilyIPv4, Name: "filter"}} {
			c.AddTable(tbl)
			c.AddChain(&nftables.Chain{Table: tbl, Name: "forward", Type: nftables.ChainTypeFilter,
				Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
		}
		return c.Flush()
	})
	assert.Equal(t, NFTables, detectIn(t, host))
}

// Upstream #1280: without CAP_NET_ADMIN a probe of nf_tables fails; detection must not
// take that for "no nftables" (and pick iptables on a node that has none).
func TestDetectNeedsNoCapNetAdmin(t *testing.T) {
	testns.RequireRoot(t)
	host := testns.New(t)
	var (
		b       Backend
		dumpErr error
	)
	host.Run(t, func() error {
		return withoutCapNetAdmin(func() error {
			_, dumpErr = dumpTables()
			b = Detect()
			return nil
		})
	})
	require.ErrorIs(t, dumpErr, unix.EPERM, "premise: nf_tables refuses the table dump detection starts with, without CAP_NET_ADMIN")
	assert.Equal(t, NFTables, b)
}

func dumpTables() ([]*nftables.Table, error) {
	c, err := nftables.New()
	if err != nil {
		return nil, err
	}
	return c.ListTables()
}

// withoutCapNetAdmin runs fn with CAP_NET_ADMIN out of the calling thread's effective
// set (capabilities are per thread; the caller holds the thread locked), then puts it
// back: raising an effective capability that is still permitted cannot fail.
func withoutCapNetAdmin(fn func() error) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	orig := data
	data[unix.CAP_NET_ADMIN/32].Effective &^= 1 << (unix.CAP_NET_ADMIN % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return err
	}
	defer unix.Capset(&hdr, &orig[0])
	return fn()
}
