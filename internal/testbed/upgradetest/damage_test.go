package upgradetest_test

import (
	"crypto/sha512"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckFailsWhenTheReferencesStateIsDamaged: CHECK of an attachment the reference
// set up passes on its intact state (TestReferenceAttachmentsAreAdopted) and fails,
// naming the plugin's state, once a piece of it is gone.
func TestCheckFailsWhenTheReferencesStateIsDamaged(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		// damage returns the command that damages the pod's state: in the host netns, or
		// in the pod's with inPod.
		damage func(p *pod, hash string) []string
		inPod  bool
		want   string
	}{
		{name: "masquerade iptables chain", backend: "iptables",
			damage: func(p *pod, h string) []string { return []string{"iptables", "-w", "-t", "nat", "-F", "CNI-" + h[:24]} },
			want:   "ipMasq: masquerade check: iptables chain CNI-"},
		{name: "masquerade nftables base chain", backend: "nftables",
			damage: func(*pod, string) []string {
				return []string{"nft", "flush", "chain", "inet", "cni_plugins_masquerade", "postrouting"}
			},
			want: "postrouting does not go to masq_checks"},
		{name: "portmap iptables chain", backend: "iptables",
			damage: func(p *pod, h string) []string {
				return []string{"ip6tables", "-w", "-t", "nat", "-F", "CNI-DN-" + h[:21]}
			},
			want: "iptables ip6tables: chain CNI-DN-"},
		{name: "portmap nftables masquerading", backend: "nftables",
			damage: func(*pod, string) []string {
				return []string{"nft", "flush", "chain", "ip", "cni_hostport", "masquerading"}
			},
			want: "cni_hostport does not masquerade"},
		{name: "firewall rule", backend: "iptables",
			damage: func(p *pod, _ string) []string {
				return []string{"iptables", "-w", "-D", "CNI-FORWARD", "-s", p.ips[0].String() + "/32", "-j", "ACCEPT"}
			},
			want: "CNI-FORWARD lacks \"-s 10.66.0.2/32 -j ACCEPT\""},
		// Backends unset: ours picks nftables, and finds the reference's rules in iptables.
		{name: "firewall rule, backend unset", backend: "",
			damage: func(p *pod, _ string) []string {
				return []string{"iptables", "-w", "-D", "CNI-FORWARD", "-s", p.ips[0].String() + "/32", "-j", "ACCEPT"}
			},
			want: "CNI-FORWARD lacks \"-s 10.66.0.2/32 -j ACCEPT\""},
		{name: "bandwidth ifb qdisc", backend: "iptables",
			damage: func(p *pod, h string) []string { return []string{"tc", "qdisc", "del", "dev", "bwp" + h[:12], "root"} },
			want:   "egress"},
		{name: "tuning mtu", backend: "iptables", inPod: true,
			damage: func(*pod, string) []string { return []string{"ip", "link", "set", "eth0", "mtu", "1500"} },
			want:   "mtu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			rt := runtimes["libcni"](t)
			nw := network{name: "upg", main: "bridge", backend: tc.backend}
			p := adopted(t, n, rt, nw, 47000)
			sum := sha512.Sum512([]byte(nw.name + p.id))
			hash := hex.EncodeToString(sum[:])
			cmd := tc.damage(p, hash)
			ns := n.host
			if tc.inPod {
				ns = p.ns
			}
			out, err := ns.Exec(t, cmd[0], cmd[1:]...)
			require.NoError(t, err, out)
			assert.ErrorContains(t, rt.check(n, []string{n.ours}, nw.conflist(n), p), tc.want)
			require.NoError(t, rt.del(n, []string{n.ours}, nw.conflist(n), p), "DEL of a damaged attachment")
			assert.Empty(t, n.naming(p, nw))
		})
	}
}
