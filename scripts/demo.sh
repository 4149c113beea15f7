#!/usr/bin/env bash
# demo.sh BIN: a real ADD, CHECK and DEL into a throwaway network namespace, printing
# each step. Everything happens inside a private "host" namespace (unshare), so the
# machine's own network is never touched and nothing outlives the demo.
set -euo pipefail
bin=$(readlink -f "${1:-bin/cni}")

if [ "${CNI_DEMO_INNER:-}" != 1 ]; then
	exec env CNI_DEMO_INNER=1 unshare --net --mount --propagation private "$0" "$bin"
fi

work=$(mktemp -d)
trap 'ip netns del demo-ctr 2>/dev/null || true; rm -rf "$work"' EXIT
mount -t tmpfs tmpfs /run/netns 2>/dev/null || { mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns; }
ip link set lo up
ip netns add demo-ctr

mkdir -p "$work/bin"
for p in $("$bin" --list); do ln -s "$bin" "$work/bin/$p"; done
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
