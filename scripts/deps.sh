#!/usr/bin/env bash
# deps.sh [GROUP]...: the one list of the Debian packages that the demo, the tests and CI
# need, and what is missing of it.
#
# Groups (default: test):
#   demo    make demo
#   test    make test (make test-tools included)
#   kernel  make test-kernel: the host's side (qemu, the VM's busybox and tools)
#   e2e     make test-e2e: containerd and runc, with iproute2, iptables and nftables
#   cluster make test-cluster: e2e's, etcd (server and etcdctl), ping
#   crio    make test-crio: conmon and runc for CRI-O (built from source by make), gcc for
#           its pinns helper, with iproute2, iptables and nftables
#   ci      everything .ci/run runs: test, kernel, e2e, cluster and crio
#
# As root on Debian (apt-get and dpkg-query on PATH), it installs what is missing, saying
# what, before anything else runs. Elsewhere, or not as root, it names every missing
# package at once and exits 1; nothing is installed. Exit 2: usage.
#
# On Debian "missing" means dpkg-query does not report the package installed; elsewhere,
# that the command it stands for is not found on PATH or in DEPS_SBIN (default
# /usr/local/sbin:/usr/sbin:/sbin, where a non-root PATH may not look). The names are
# Debian's (bookworm and later); elsewhere install the equivalents.
set -euo pipefail

# packages GROUP prints "package command" lines: the Debian package, and a command it
# installs that the tests use (what is looked for where there is no dpkg-query).
packages() {
	case $1 in
	demo)
		printf '%s\n' "iproute2 ip"
		;;
	test)
		packages demo
		printf '%s\n' "iptables iptables-save" "nftables nft" "iputils-ping ping" \
			"dbus-daemon dbus-daemon" "dnsmasq-base dnsmasq" \
			"dpkg dpkg-deb" "rpm rpm" "rpm2cpio rpm2cpio" "cpio cpio"
		;;
	kernel)
		# A dynamically linked busybox (package busybox) cannot run as the VM's init.
		printf '%s\n' "qemu-system-x86 qemu-system-x86_64" "busybox-static busybox" "cpio cpio" \
			"kmod depmod" "iptables iptables-save" "nftables nft" "iproute2 ip" \
			"dbus-daemon dbus-daemon" "dnsmasq-base dnsmasq"
		;;
	e2e)
		printf '%s\n' "containerd containerd" "runc runc" "iproute2 ip" "iptables iptables-save" "nftables nft"
		;;
	cluster)
		packages e2e
		printf '%s\n' "etcd-server etcd" "etcd-client etcdctl" "iputils-ping ping"
		;;
	crio)
		# CRI-O 1.34's runtime spec is too new for Debian 12's crun: runc runs it.
		printf '%s\n' "conmon conmon" "runc runc" "gcc gcc" "libc6-dev gcc" "iproute2 ip" "iptables iptables-save" "nftables nft"
		;;
	ci)
		packages test
		packages kernel
		packages e2e
		packages cluster
		packages crio
		;;
	*)
		return 1
		;;
	esac
}

log() { printf 'deps.sh: %s\n' "$*" >&2; }

# join SEP WORD...: the words with SEP between them.
join() {
	local sep=$1 out=$2
	shift 2
	for w in "$@"; do out+="$sep$w"; done
	printf '%s' "$out"
}

on_debian() { command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; }

# installed PACKAGE COMMAND: dpkg's word on Debian, else whether the command is found.
installed() {
	if on_debian; then
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
	else
		PATH="$PATH:${DEPS_SBIN-/usr/local/sbin:/usr/sbin:/sbin}" command -v "$2" >/dev/null
	fi
}

# missing GROUP...: the packages of the groups that are not installed, each once, with
# the command each stands for ("package:command").
missing() {
	local group pkg cmd
	local -A seen=()
	for group in "$@"; do
		while read -r pkg cmd; do
			[ -z "${seen[$pkg]:-}" ] || continue
			seen[$pkg]=1
			installed "$pkg" "$cmd" || echo "$pkg:$cmd"
		done < <(packages "$group")
	done
}

main() {
	local groups=("$@") group
	[ ${#groups[@]} -gt 0 ] || groups=(test)
	for group in "${groups[@]}"; do
		if ! packages "$group" >/dev/null; then
			log "unknown group \"$group\" (demo, test, kernel, e2e, cluster, crio, ci)"
			exit 2
		fi
	done
	local need=() entry
	while read -r entry; do need+=("$entry"); done < <(missing "${groups[@]}")
	[ ${#need[@]} -gt 0 ] || return 0

	local names=() shown=()
	for entry in "${need[@]}"; do
		names+=("${entry%%:*}")
		shown+=("${entry%%:*} (${entry#*:})")
	done
	if ! on_debian || [ "$(id -u)" != 0 ]; then
		log "missing for ${groups[*]}: $(join ", " "${shown[@]}")"
		if on_debian; then
			log "run as root to install them: scripts/deps.sh ${groups[*]} (or apt-get install ${names[*]})"
		else
			log "these are Debian's package names (the command each provides in brackets): install the equivalents"
		fi
		exit 1
	fi
	log "installing for ${groups[*]}: ${names[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# A fresh machine's package lists may be empty or stale: update only when needed.
	apt-get install -y -q --no-install-recommends "${names[@]}" >&2 ||
		{ apt-get update -q >&2 && apt-get install -y -q --no-install-recommends "${names[@]}" >&2; } || {
		log "apt-get install ${names[*]} failed"
		exit 1
	}
	need=()
	while read -r entry; do need+=("${entry%%:*}"); done < <(missing "${groups[@]}")
	if [ ${#need[@]} -gt 0 ]; then
		log "still missing after apt-get install: ${need[*]}"
		exit 1
	fi
}

main "$@"
