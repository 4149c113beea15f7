#!/usr/bin/env bash
# demo.sh BIN: the standard chain through the embedded runner (`cni add|check|del`), the
# way a container runtime uses it: a "loopback" network on lo, then "demo" made of
# bridge (+host-local, ipMasq on), portmap (one TCP mapping from CAP_ARGS) and bandwidth,
# as far as those plugins are built in. ADD prints the result, then CHECK and DEL, into a
# throwaway netns. Everything happens inside a private "host" namespace (unshare) with a
# tmpfs /run and temp cache and IPAM dirs, so the machine's own network is never touched
# and nothing outlives the demo. With portmap built in, a TCP responder in the container
# answers a connection made to the mapped host port from a third netns ("demo-client",
# wired to the host by a veth on 192.0.2.0/24, a documentation range), so the mapping is
# shown working whatever firewall tools the machine has. With only loopback built in, it
# falls back to exec'ing the loopback plugin by hand.
set -euo pipefail
bin=$(readlink -f "${1:-bin/cni}")

if [ "${CNI_DEMO_INNER:-}" != 1 ]; then
	exec env CNI_DEMO_INNER=1 unshare --net --mount --propagation private "$0" "$bin"
fi

work=$(mktemp -d)
responder=
cleanup() {
	if [ -n "$responder" ]; then kill "$responder" 2>/dev/null || true; fi
	ip netns del demo-client 2>/dev/null || true
	ip netns del demo-ctr 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# A private /run: netns mounts and lock files stay in this mount namespace.
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
ip link set lo up
ip netns add demo-ctr

mkdir -p "$work/bin" "$work/net.d"
for p in $("$bin" --list); do ln -s "$bin" "$work/bin/$p"; done
has() { [ -e "$work/bin/$1" ]; }

if ! has bridge; then
	conf='{"cniVersion":"1.1.0","name":"demo","type":"loopback"}'
	step() {
		echo "== $1"
		echo "$conf" | CNI_COMMAND=$1 CNI_CONTAINERID=demo1 CNI_NETNS=/run/netns/demo-ctr \
			CNI_IFNAME=eth0 CNI_PATH="$work/bin" "$work/bin/loopback"
		echo "(exit $?)"
	}
	step ADD
	ip netns exec demo-ctr ip -br addr show lo
	step CHECK
	step DEL
	exit 0
fi

plugins='{"type":"bridge","bridge":"cni-demo0","isGateway":true,"ipMasq":true,
  "ipam":{"type":"host-local","dataDir":"'"$work/ipam"'","ranges":[[{"subnet":"10.88.0.0/24"}]],
          "routes":[{"dst":"0.0.0.0/0"}]}}'
if has portmap; then
	plugins+=',{"type":"portmap","capabilities":{"portMappings":true}}'
fi
if has bandwidth; then
	plugins+=',{"type":"bandwidth","capabilities":{"bandwidth":true}}'
fi
cat >"$work/net.d/10-demo.conflist" <<CONF
{"cniVersion":"1.1.0","name":"demo","plugins":[$plugins]}
CONF
cat >"$work/net.d/99-loopback.conflist" <<CONF
{"cniVersion":"1.1.0","name":"loopback","plugins":[{"type":"loopback"}]}
CONF

export NETCONFPATH="$work/net.d" CNI_PATH="$work/bin" CNI_CACHE_DIR="$work/cache"
export CAP_ARGS='{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],
  "bandwidth":{"ingressRate":10000000,"ingressBurst":1000000,"egressRate":10000000,"egressBurst":1000000}}'
ns=/run/netns/demo-ctr

run() {
	echo "== cni $*"
	"$bin" "$@"
}
run ls
run add loopback "$ns" --ifname lo
run add demo "$ns"
echo "== container:"
ip netns exec demo-ctr ip -br addr
ip netns exec demo-ctr ip route
echo "== host:"
ip -br link
if has portmap; then
	echo "== host port 8080 -> container port 80, asked from another netns:"
	# portmap puts its rules in nftables or iptables, whichever the machine uses, and the
	# tool to list them may be missing: a real request shows the mapping either way.
	# The responder is perl (perl-base is part of every Debian system); it answers one
	# connection with the addresses it sees.
	ip netns exec demo-ctr perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalPort => 80, Listen => 1, ReuseAddr => 1) or die "listen: $!\n";
		my $c = $s->accept or die "accept: $!\n";
		printf $c "hello from the container: %s:%d answering %s:%d\n",
			$c->sockhost, $c->sockport, $c->peerhost, $c->peerport;
		close $c;' &
	responder=$!
	ip netns add demo-client
	ip link add demo-host type veth peer name demo-peer netns demo-client
	ip addr add 192.0.2.1/24 dev demo-host
	ip link set demo-host up
	ip -n demo-client addr add 192.0.2.2/24 dev demo-peer
	ip -n demo-client link set demo-peer up
	for _ in $(seq 50); do
		ip netns exec demo-ctr ss -Hltn 'sport = :80' | grep -q . && break
		sleep 0.1
	done
	echo "demo-client (192.0.2.2) connects to the host's 192.0.2.1:8080 and reads:"
	ip netns exec demo-client timeout 5 bash -c 'exec 3<>/dev/tcp/192.0.2.1/8080 && cat <&3' ||
		echo "no answer through the mapped port" >&2
	wait "$responder" 2>/dev/null || true
	responder=
fi
run check loopback "$ns" --ifname lo
run check demo "$ns"
run del demo "$ns"
run del loopback "$ns" --ifname lo
echo "== after DEL: cache entries left: $(find "$work/cache" -type f | wc -l)"
ip netns exec demo-ctr ip -br addr
