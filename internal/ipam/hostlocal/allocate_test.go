package hostlocal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/spec/skel"
)

// step is one operation of an allocation scenario: ADD (want = addresses) or DEL.
type step struct {
	del     bool
	id      string
	want    []string
	wantErr string
	code    uint
}

func TestAllocationOrder(t *testing.T) {
	cases := []struct {
		name  string
		ipam  obj
		steps []step
	}{
		{name: "sequential from rangeStart, gateway skipped",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/24"}}, {id: "b", want: []string{"10.1.0.3/24"}},
				{id: "c", want: []string{"10.1.0.4/24"}}}},
		{name: "round robin does not reuse a released address at once",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/24"}}, {del: true, id: "a"},
				{id: "b", want: []string{"10.1.0.3/24"}}}},
		{name: "wraps around to the range start",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/29"})}}, // .2-.6 usable
			steps: []step{{id: "a", want: []string{"10.1.0.2/29"}}, {id: "b", want: []string{"10.1.0.3/29"}},
				{id: "c", want: []string{"10.1.0.4/29"}}, {id: "d", want: []string{"10.1.0.5/29"}},
				{del: true, id: "b"}, {id: "e", want: []string{"10.1.0.6/29"}}, {id: "f", want: []string{"10.1.0.3/29"}}}},
		{name: "gateway in the middle is skipped",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.3", "rangeEnd": "10.1.0.6", "gateway": "10.1.0.4"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.3/24"}}, {id: "b", want: []string{"10.1.0.5/24"}},
				{id: "c", want: []string{"10.1.0.6/24"}},
				{id: "d", wantErr: "no IP addresses available in range set: 10.1.0.3-10.1.0.6", code: cnierror.CodeInternal}}},
		{name: "exhaustion",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/30"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/30"}},
				{id: "b", wantErr: "no IP addresses available", code: cnierror.CodeInternal},
				{del: true, id: "a"}, {id: "c", want: []string{"10.1.0.2/30"}}}},
		{name: "several pools in one set, in order, wrapping",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/30"}, obj{"subnet": "10.2.0.0/30"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/30"}}, {id: "b", want: []string{"10.2.0.2/30"}},
				{id: "c", wantErr: "no IP addresses available in range set: 10.1.0.1-10.1.0.2,10.2.0.1-10.2.0.2", code: cnierror.CodeInternal},
				{del: true, id: "a"}, {id: "d", want: []string{"10.1.0.2/30"}}}},
		{name: "dual stack",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/120"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/24", "fd00::2/120"}},
				{id: "b", want: []string{"10.1.0.3/24", "fd00::3/120"}}}},
		{name: "one exhausted set fails the ADD and releases the other",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "10.2.0.0/30"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/24", "10.2.0.2/30"}},
				{id: "b", wantErr: "failed to allocate for range 1", code: cnierror.CodeInternal},
				{del: true, id: "a"}, {id: "c", want: []string{"10.1.0.4/24", "10.2.0.2/30"}}}},
		{name: "legacy subnet comes first",
			ipam:  obj{"subnet": "10.9.0.0/24", "ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}},
			steps: []step{{id: "a", want: []string{"10.9.0.2/24", "10.1.0.2/24"}}}},
		{name: "duplicate allocation is refused",
			ipam: obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}},
			steps: []step{{id: "a", want: []string{"10.1.0.2/24"}},
				{id: "a", wantErr: "10.1.0.2 has been allocated to a, duplicate allocation is not allowed",
					code: cnierror.CodeInvalidConfig}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, tc.ipam)
			for i, s := range tc.steps {
				if s.del {
					require.NoError(t, n.del(s.id, "eth0"), "step %d", i)
					continue
				}
				before := n.reservations()
				res, err := n.add(s.id, "eth0")
				if s.wantErr != "" {
					require.Error(t, err, "step %d", i)
					assert.Contains(t, err.Error(), s.wantErr, "step %d", i)
					if s.code != 0 {
						assert.Equal(t, s.code, cnierror.Code(err), "step %d", i)
					}
					// A refused ADD neither keeps what it took from an earlier set nor
					// touches what others (or the same attachment) hold.
					assert.Equal(t, before, n.reservations(), "step %d: a refused ADD reserves nothing", i)
					continue
				}
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, s.want, addrs(res), "step %d", i)
				// Each returned address is on disk, reserved for this attachment.
				held := n.reservations()
				for _, ip := range res.IPs {
					assert.Equal(t, s.id+"\r\neth0", held[ip.Address.Addr().String()], "step %d: reservation of %s", i, ip.Address)
				}
			}
		})
	}
}

func TestRequestedIPs(t *testing.T) {
	dual := obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/120"})}}
	cases := []struct {
		name    string
		cniArgs string
		extra   obj
		want    []string
		wantErr string
		code    uint
	}{
		{name: "CNI_ARGS IP", cniArgs: "IP=10.1.0.9", want: []string{"10.1.0.9/24", "fd00::3/120"}},
		{name: "CNI_ARGS with unknown key and IgnoreUnknown", cniArgs: "IgnoreUnknown=1;K8S_POD_NAME=x;IP=10.1.0.9",
			want: []string{"10.1.0.9/24", "fd00::3/120"}},
		{name: "args.cni.ips", extra: obj{"args": obj{"cni": obj{"ips": []string{"fd00::20", "10.1.0.20"}}}},
			want: []string{"10.1.0.20/24", "fd00::20/120"}},
		{name: "ips capability with prefix length", extra: obj{"runtimeConfig": obj{"ips": []string{"10.1.0.30/24"}}},
			want: []string{"10.1.0.30/24", "fd00::3/120"}},
		{name: "requested gateway", cniArgs: "IP=10.1.0.1", wantErr: "requested ip 10.1.0.1 is subnet's gateway",
			code: cnierror.CodeInvalidConfig},
		{name: "requested in no range", extra: obj{"runtimeConfig": obj{"ips": []string{"10.7.0.5"}}},
			wantErr: "failed to allocate all requested IPs: 10.7.0.5", code: cnierror.CodeInvalidConfig},
		{name: "several requests in no range are listed by spaces",
			extra:   obj{"runtimeConfig": obj{"ips": []string{"10.7.0.5", "fd07::5"}}},
			wantErr: "failed to allocate all requested IPs: 10.7.0.5 fd07::5", code: cnierror.CodeInvalidConfig},
		{name: "bad requested address names its field", extra: obj{"args": obj{"cni": obj{"ips": []string{"10.1.0.9", "nope"}}}},
			wantErr: `args.cni.ips[1]: invalid IP address "nope"`, code: cnierror.CodeInvalidConfig},
		{name: "two requests for one set", extra: obj{"runtimeConfig": obj{"ips": []string{"10.1.0.5", "10.1.0.6"}}},
			wantErr: "failed to allocate all requested IPs: 10.1.0.6", code: cnierror.CodeInvalidConfig},
		{name: "requested already taken", cniArgs: "IP=10.1.0.2", wantErr: "requested IP address 10.1.0.2 is not available",
			code: cnierror.CodeTryAgainLater},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t, dual)
			n.extra = obj{}
			n.mustAdd("first", "eth0") // holds 10.1.0.2 and fd00::2
			n.extra = tc.extra
			before := n.reservations()
			res, _, err := n.invoke(skel.CmdAdd, "c1", "eth0", tc.cniArgs)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Equal(t, tc.code, cnierror.Code(err), "%v", err)
				assert.Len(t, n.reservations(), 2, "a failed ADD releases what it reserved")
				assert.Equal(t, before, n.reservations(), "first's reservations are untouched")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, addrs(res))
			held := n.reservations()
			for _, ip := range res.IPs {
				assert.Equal(t, "c1\r\neth0", held[ip.Address.Addr().String()], "reservation of %s", ip.Address)
			}
		})
	}
}

func TestIPRangesCapabilityIsPrepended(t *testing.T) {
	n := newNetwork(t, obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"})}})
	n.extra = obj{"runtimeConfig": obj{"ipRanges": []any{set(obj{"subnet": "10.9.0.0/24", "rangeStart": "10.9.0.100"})}}}
	res := n.mustAdd("a", "eth0")
	assert.Equal(t, []string{"10.9.0.100/24", "10.1.0.2/24"}, addrs(res))
	last0, err := os.ReadFile(filepath.Join(n.dir(), "last_reserved_ip.0"))
	require.NoError(t, err)
	assert.Equal(t, "10.9.0.100", string(last0))
	last1, err := os.ReadFile(filepath.Join(n.dir(), "last_reserved_ip.1"))
	require.NoError(t, err)
	assert.Equal(t, "10.1.0.2", string(last1))
}

func TestAddReturnsRoutesDNSAndConfigVersion(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	require.NoError(t, os.WriteFile(resolv, []byte("# comment\nnameserver 10.0.0.53\nnameserver fd00::53\n"+
		"domain example.org\nsearch a.example b.example\noptions ndots:2 edns0\n"), 0o600))
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24", "resolvConf": resolv,
		"routes": []any{obj{"dst": "0.0.0.0/0"}, obj{"dst": "192.168.0.0/16", "gw": "10.1.0.254"}}})
	n.version = "0.3.1"
	res := n.mustAdd("a", "eth0")
	assert.Equal(t, "0.3.1", res.CNIVersion)
	require.Len(t, res.Routes, 2)
	assert.Equal(t, "0.0.0.0/0", res.Routes[0].Dst.String())
	assert.False(t, res.Routes[0].GW.IsValid())
	assert.Equal(t, "10.1.0.254", res.Routes[1].GW.String())
	assert.Equal(t, []string{"10.0.0.53", "fd00::53"}, res.DNS.Nameservers)
	assert.Equal(t, "example.org", res.DNS.Domain)
	assert.Equal(t, []string{"a.example", "b.example"}, res.DNS.Search)
	assert.Equal(t, []string{"ndots:2", "edns0"}, res.DNS.Options)
	assert.Nil(t, res.IPs[0].Interface, "an IPAM result names no interface")
}

func TestVersion020ResultCarriesOneAddressPerFamily(t *testing.T) {
	n := newNetwork(t, obj{"ranges": []any{set(obj{"subnet": "10.1.0.0/24"}), set(obj{"subnet": "fd00::/64"})}})
	n.version = "0.2.0"
	res := n.mustAdd("a", "eth0")
	assert.Equal(t, "0.2.0", res.CNIVersion)
	assert.Equal(t, []string{"10.1.0.2/24", "fd00::2/64"}, addrs(res))
}

func TestDelReleasesOnlyTheAttachmentsAddresses(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	n.mustAdd("a", "eth0")
	n.mustAdd("a", "eth1")
	n.mustAdd("b", "eth0")
	require.NoError(t, n.del("a", "eth0"))
	assert.Equal(t, map[string]string{"10.1.0.3": "a\r\neth1", "10.1.0.4": "b\r\neth0"}, n.reservations())
	// CHECK agrees: a/eth0 holds nothing now, while a/eth1 and b/eth0 still do.
	_, _, err := n.invoke(skel.CmdCheck, "a", "eth0", "")
	assert.ErrorContains(t, err, "Failed to find address added by container a")
	for _, id := range []string{"a/eth1", "b/eth0"} {
		_, _, err = n.invoke(skel.CmdCheck, id[:1], id[2:], "")
		assert.NoError(t, err, id)
	}
	// A second DEL of a/eth0 finds nothing to release and leaves the others alone.
	require.NoError(t, n.del("a", "eth0"))
	assert.Equal(t, map[string]string{"10.1.0.3": "a\r\neth1", "10.1.0.4": "b\r\neth0"}, n.reservations())
}

func TestDelWithoutStateSucceedsAndCreatesNothing(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	require.NoError(t, n.del("a", "eth0"))
	_, err := os.Stat(n.dir())
	assert.True(t, os.IsNotExist(err))
}

func TestCheckFindsTheAttachment(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	_, _, err := n.invoke(skel.CmdCheck, "a", "eth0", "")
	require.ErrorContains(t, err, "Failed to find address added by container a")
	n.mustAdd("a", "eth0")
	_, _, err = n.invoke(skel.CmdCheck, "a", "eth0", "")
	require.NoError(t, err)
	require.NoError(t, n.del("a", "eth0"))
	_, _, err = n.invoke(skel.CmdCheck, "a", "eth0", "")
	require.ErrorContains(t, err, "Failed to find address added by container a")
}

func TestManyAttachmentsGetDistinctAddresses(t *testing.T) {
	n := newNetwork(t, obj{"subnet": "10.1.0.0/24"})
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		res := n.mustAdd(fmt.Sprintf("c%d", i), "eth0")
		a := res.IPs[0].Address.String()
		require.False(t, seen[a], "duplicate %s", a)
		seen[a] = true
	}
	for i := 0; i < 50; i++ {
		require.NoError(t, n.del(fmt.Sprintf("c%d", i), "eth0"))
	}
	assert.Empty(t, n.reservations())
}
