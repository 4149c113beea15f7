#!/usr/bin/env bash
# Run the repository's Go tests that this machine's kernel cannot run inside a
# qemu VM that boots a Debian distribution kernel, so tests needing vlan,
# ipvlan, vrf, dummy, bond or bridge vlan_filtering run for real (with
# CNI_TEST_FULL_KERNEL=1 a missing feature fails instead of skipping). Those
# tests only: the rest ran here already (make test). Which they are is asked
# of the tests themselves: the packages whose test binaries link
# internal/testbed/kernelfeature (no other test can ask for a feature) run
# here first with CNI_TEST_KERNEL_SKIPS set, where kernelfeature.Require notes
# every test it skips; the VM runs those top-level tests, so a new test that
# needs a feature goes there with no list to keep. The packages of
# scripts/nofirewall-packages among them then run a second time under
# cmd/nofirewall, with the firewall binaries hidden (as make
# test-nofirewall does).
#
# Usage: scripts/test-kernel.sh [go package patterns...]   (default ./...)
#
# Inside the VM the tests see CNI_TEST_FULL_KERNEL=1, CNI_TEST_BINARY (the
# prebuilt cmd/cni), CNI_TEST_CRASHPOINT_BINARY (the same built with the
# crashpoint tag), CNI_TEST_HELPER_DIR (prebuilt main packages found
# below testdata/ directories) and CNI_TEST_REFERENCE_DIR (the reference
# plugins of internal/testbed/reftest), since the VM has no Go toolchain.
#
# Environment:
#   CNI_KERNEL_CACHE         cache for the kernel (default ~/.cache/cni-test-kernel)
#   CNI_KERNEL_VM_TIMEOUT    wall-clock limit of the VM (default 50m)
#   CNI_KERNEL_TEST_TIMEOUT  -test.timeout per package inside the VM (default 25m)
#   CNI_KERNEL_TEST_ARGS     extra test flags, e.g. "-test.run TestVLAN"
#   CNI_KERNEL_VM_MEMORY     VM memory (default 4G: the initramfs holds every package's test binary and unpacks into half of it); CNI_KERNEL_VM_CPUS (default 2)
#   CNI_KERNEL_TEST_JOBS     test packages run side by side (default: the vCPUs);
#                            1 streams output live instead of per package
#   CNI_KERNEL_ALL_TESTS=1   every test of every package in the VM, as before
#                            (also what happens when the run here fails)
#
# Exit status: 0 only if every package built and passed in the VM; non-zero
# when a test failed, a build failed, or the VM never printed its result
# marker (kernel panic, timeout).
set -euo pipefail

readonly repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly support="$repo/scripts/test-kernel"
readonly cache="${CNI_KERNEL_CACHE:-$HOME/.cache/cni-test-kernel}"
readonly vm_timeout="${CNI_KERNEL_VM_TIMEOUT:-50m}"
readonly test_timeout="${CNI_KERNEL_TEST_TIMEOUT:-25m}"
readonly marker="CNI-KERNEL-TEST-RESULT"
readonly kernel_meta_pkg="linux-image-cloud-amd64"
readonly libdir=/usr/lib/x86_64-linux-gnu

log() { printf 'test-kernel: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# ensure_host_tools installs what is missing of the host tools the VM image is made of
# (and qemu itself): scripts/deps.sh's "kernel" group, the one list of them.
ensure_host_tools() {
	"$repo/scripts/deps.sh" kernel || die "host packages missing (scripts/deps.sh kernel)"
	command -v go >/dev/null 2>&1 || export PATH="$PATH:/usr/local/go/bin"
	command -v go >/dev/null 2>&1 || die "go toolchain not found (looked in PATH and /usr/local/go/bin)"
}

# kernel_package prints the versioned kernel package the Debian meta package
# currently points to, e.g. linux-image-6.1.0-48-cloud-amd64.
kernel_package() {
	apt-cache depends "$kernel_meta_pkg" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'
}

# fetch_kernel makes sure the current kernel package is unpacked in the cache
# and prints its directory. Without apt metadata it falls back to the newest
# cached kernel, so a cached run works offline.
fetch_kernel() {
	local pkg version dir tmp
	pkg=$(kernel_package) || true
	if [[ -z "$pkg" ]]; then
		apt-get update -q >&2 || true
		pkg=$(kernel_package) || true
	fi
	if [[ -n "$pkg" ]]; then
		version=$(apt-cache show --no-all-versions "$pkg" | awk '$1 == "Version:" { print $2; exit }')
		dir="$cache/${pkg}_${version}"
	else
		dir=$(ls -1d "$cache"/linux-image-*/ 2>/dev/null | sort -V | tail -n 1)
		dir=${dir%/}
		[[ -n "$dir" ]] || die "cannot resolve $kernel_meta_pkg and no kernel is cached"
		log "apt metadata unavailable; using cached $(basename "$dir")"
	fi
	if [[ ! -d "$dir" ]]; then
		log "downloading $pkg $version into $cache"
		mkdir -p "$cache"
		tmp=$(mktemp -d "$cache/.download.XXXXXX")
		# apt drops to the _apt user for downloads; let it write here.
		chown _apt "$tmp" 2>/dev/null || true
		(cd "$tmp" && apt-get download -q "$pkg=$version" >&2) ||
			{ rm -rf "$tmp"; die "apt-get download $pkg failed"; }
		dpkg -x "$tmp"/*.deb "$tmp/root"
		# Debian generates modules.dep at install time; the trimmed copy in
		# each run needs it to find module dependencies.
		depmod -b "$tmp/root" "$(basename "$(ls -1d "$tmp"/root/lib/modules/*/)")"
		mv "$tmp/root" "$dir"
		rm -rf "$tmp"
		# Only the current kernel is worth keeping.
		find "$cache" -mindepth 1 -maxdepth 1 -name 'linux-image-*' ! -path "$dir" -exec rm -rf {} +
	fi
	printf '%s\n' "$dir"
}

# kernel_tests writes "dir pattern" lines to $1: for each package directory,
# the -test.run pattern of its top-level tests that skip on this machine's
# kernel for lack of a feature. It runs the packages of the given patterns
# whose test binaries link kernelfeature (and its own) here, with CNI_TEST_KERNEL_SKIPS
# set; it fails when that run fails (its notes may then be incomplete).
kernel_tests() {
	local out=$1 notes pkgs
	shift
	notes=$(mktemp -d "${TMPDIR:-/tmp}/cni-kernel-skips.XXXXXX")
	pkgs=$(cd "$repo" && go list -e -test -f '{{if .ForTest}}{{.ForTest}}{{range .Deps}} {{.}}{{end}}{{end}}' "$@" |
		awk -v kf="$(go list -m)/internal/testbed/kernelfeature" '{ for (i = 1; i <= NF; i++) if ($i == kf) { print $1; break } }' | sort -u)
	: >"$out"
	if [[ -z "$pkgs" ]]; then
		rm -rf "$notes"
		return 0
	fi
	log "finding the tests that skip on this kernel: go test $(wc -w <<<"$pkgs") package(s) here"
	if ! (cd "$repo" && CNI_TEST_KERNEL_SKIPS="$notes" go test -count=1 -timeout 30m $pkgs >&2); then
		rm -rf "$notes"
		return 1
	fi
	cat "$notes"/skips-* 2>/dev/null | sort -u | awk -F '\t' -f "$support/patterns.awk" >"$out"
	rm -rf "$notes"
}

# build_go compiles the test binaries the VM runs and the product binary,
# and writes the VM's run list: "importpath dir binary [pattern]". With a
# pattern file ($2, from kernel_tests) only its packages are built, each run
# with its pattern; with none ("") every package with tests, every test.
build_go() {
	local out=$1 patterns=$2
	shift 2
	local module pkgs pkg dir rel bin pattern failed=0
	mkdir -p "$out/tests" "$out/opt/cni-test/bin"
	module=$(cd "$repo" && go list -m)
	pkgs=$(cd "$repo" && go list -e -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "$@")
	: >"$out/tests/list"
	while read -r pkg dir; do
		[[ -n "$pkg" ]] || continue
		pattern=""
		if [[ -n "$patterns" ]]; then
			pattern=$(awk -v d="$dir" '$1 == d { print $2 }' "$patterns")
			[[ -n "$pattern" ]] || continue
		fi
		rel=${dir#"$repo"}
		rel=${rel#/}
		rel=${rel:-.}
		bin="${rel//\//_}"
		bin="${bin/#./root}.test"
		log "building $pkg${pattern:+ (-test.run $pattern)}"
		if (cd "$repo" && CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$out/tests/$bin" "$pkg"); then
			printf '%s %s %s %s\n' "$pkg" "$rel" "$bin" "$pattern" >>"$out/tests/list"
		else
			log "BUILD FAIL $pkg"
			failed=1
		fi
	done <<<"$pkgs"
	[[ -s "$out/tests/list" ]] || log "no test packages matched: $*"
	build_helpers "$out/opt/cni-test/helpers" || failed=1
	copy_reference "$out/opt/cni-test/reference" || failed=1
	log "building $module/cmd/cni"
	(cd "$repo" && CGO_ENABLED=0 go build -o "$out/opt/cni-test/bin/cni" ./cmd/cni) || failed=1
	log "building $module/cmd/cni with the crashpoint tag"
	(cd "$repo" && CGO_ENABLED=0 go build -tags crashpoint -o "$out/opt/cni-test/bin/cni-crashpoint" ./cmd/cni) || failed=1
	log "building $module/cmd/nofirewall"
	(cd "$repo" && CGO_ENABLED=0 go build -o "$out/opt/cni-test/bin/nofirewall" ./cmd/nofirewall) || failed=1
	# The second pass, without firewall binaries: the built packages that
	# scripts/nofirewall-packages names.
	awk 'NR == FNR { want[$1] = 1; next } want[$1]' \
		<(cd "$repo" && go list $(grep -v '^#' scripts/nofirewall-packages)) "$out/tests/list" >"$out/tests/nofirewall.list"
	return "$failed"
}

# build_helpers prebuilds every main package below a testdata directory
# (stand-in plugins that tests otherwise `go build` at run time; the VM has no
# Go toolchain). The binary for ./internal/ipam/testdata/extipam lands at
# $CNI_TEST_HELPER_DIR/internal/ipam/testdata/extipam.
build_helpers() {
	local out=$1 dir failed=0
	while read -r dir; do
		[[ "$(cd "$repo" && go list -e -f '{{.Name}}' "./$dir" 2>/dev/null)" == main ]] || continue
		log "building test helper ./$dir"
		mkdir -p "$out/$(dirname "$dir")"
		(cd "$repo" && CGO_ENABLED=0 go build -o "$out/$dir" "./$dir") || { log "BUILD FAIL ./$dir"; failed=1; }
	done < <(cd "$repo" && find . -path ./.git -prune -o -path '*/testdata/*' -name '*.go' ! -name '*_test.go' -printf '%h\n' |
		sed 's|^\./||' | sort -u)
	return "$failed"
}

# copy_reference puts the reference plugins the interop tests run (internal/testbed/reftest's
# build in the user cache dir, made first when missing) into the image, for
# CNI_TEST_REFERENCE_DIR: the VM cannot build them. They are static binaries.
copy_reference() {
	local out=$1 version dir
	version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' "$repo/internal/testbed/reftest/reftest.go")
	dir="${XDG_CACHE_HOME:-$HOME/.cache}/cni-reference-plugins/$version"
	if [[ ! -x "$dir/bridge" ]]; then
		log "building the reference plugins $version"
		(cd "$repo" && go test -count=1 -run TestReferenceBinariesAnswerVersion ./internal/testbed/reftest >&2) || return 1
	fi
	mkdir -p "$out"
	cp -a "$dir"/. "$out"/
}

# copy_with_libs copies executables or libraries into the image together with
# every shared library ldd says they need, keeping their paths.
copy_with_libs() {
	local root=$1 file lib
	shift
	for file in "$@"; do
		install -D -m 0755 "$(readlink -f "$file")" "$root$file"
		ldd "$file" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
			lib="$(readlink -f "$(dirname "$lib")")/$(basename "$lib")"
			[[ -e "$root$lib" ]] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
		done
	done
}

# copy_modules puts the network part of the kernel's module tree, plus
# whatever those modules depend on, into the image and indexes it.
copy_modules() {
	local root=$1 kdir=$2 kver modroot wanted
	kver=$(basename "$(ls -1d "$kdir"/lib/modules/*/ | head -n 1)")
	modroot="$kdir/lib/modules/$kver"
	wanted=$(cd "$modroot" && find kernel/net/netfilter kernel/net/ipv4/netfilter kernel/net/ipv6/netfilter \
		kernel/net/sched kernel/net/bridge kernel/net/8021q kernel/net/xfrm kernel/drivers/net/ipvlan kernel/drivers/net/bonding \
		kernel/drivers/net/vxlan -name '*.ko*' &&
		ls kernel/drivers/net/{dummy,veth,vrf,macvlan,macvtap,tap,ifb,tun,geneve}.ko* 2>/dev/null)
	# modules.dep lines read "module: dep dep ..."; take the closure.
	awk -v want="$wanted" '
		BEGIN { n = split(want, w, "\n"); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
		{ sub(":", "", $1); deps[$1] = ""; for (i = 2; i <= NF; i++) deps[$1] = deps[$1] " " $i }
		END {
			do {
				grew = 0
				for (m in keep) { k = split(deps[m], d, " "); for (i = 1; i <= k; i++) if (!(d[i] in keep)) { keep[d[i]] = 1; grew = 1 } }
			} while (grew)
			for (m in keep) if (m != "") print m
		}' "$modroot/modules.dep" |
		while read -r mod; do
			install -D -m 0644 "$modroot/$mod" "$root/usr/lib/modules/$kver/$mod"
		done
	cp "$modroot"/modules.{order,builtin,builtin.modinfo} "$root/usr/lib/modules/$kver/" 2>/dev/null || true
	depmod -b "$root" "$kver"
	install -D -m 0644 "$support/modprobe.conf" "$root/etc/modprobe.d/cni-test.conf"
}

# make_root assembles the VM's root file system in $root.
make_root() {
	local root=$1 kdir=$2 applet target
	mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib64,"${libdir#/}",proc,sys,dev,run,tmp,root,src} \
		"$root"/{etc/cni/net.d,var/lib/cni,opt/cni/bin}
	chmod 1777 "$root/tmp"
	# Debian's merged /usr layout, so ldd's paths resolve as on the host.
	ln -s usr/bin "$root/bin"
	ln -s usr/sbin "$root/sbin"
	ln -s usr/lib "$root/lib"
	ln -s usr/lib64 "$root/lib64"
	ln -s ../run "$root/var/run"

	# iproute2's tc too: busybox's knows no clsact/ingress filters, which the upgrade
	# matrix lists.
	copy_with_libs "$root" /usr/sbin/xtables-nft-multi /usr/sbin/nft /usr/bin/ip /usr/sbin/tc /usr/bin/kmod \
		/usr/bin/bash /usr/bin/dash
	# Debian's /bin/sh, so scripts under test meet the same shell as on the host.
	ln -s dash "$root/usr/bin/sh"
	cp -a "$libdir/xtables" "$root$libdir/"
	copy_with_libs "$root" "$libdir"/xtables/*.so
	for target in iptables ip6tables iptables-restore ip6tables-restore iptables-save ip6tables-save \
		iptables-nft ip6tables-nft iptables-nft-restore ip6tables-nft-restore iptables-nft-save ip6tables-nft-save; do
		ln -s xtables-nft-multi "$root/usr/sbin/$target"
	done
	ln -s ../bin/ip "$root/usr/sbin/ip"
	# The legacy iptables backend (backend detection tests) and dbus-daemon (the firewall
	# plugin's firewalld tests run a private bus).
	copy_with_libs "$root" /usr/sbin/xtables-legacy-multi /usr/bin/dbus-daemon
	# dnsmasq: the DHCP server of the dhcp plugin's tests (internal/ipam/dhcp/dhcptest).
	copy_with_libs "$root" /usr/sbin/dnsmasq
	for target in iptables-legacy ip6tables-legacy iptables-legacy-save ip6tables-legacy-save \
		iptables-legacy-restore ip6tables-legacy-restore; do
		ln -s xtables-legacy-multi "$root/usr/sbin/$target"
	done
	mkdir -p "$root/usr/share/dbus-1"
	cp -a /usr/share/dbus-1/session.conf "$root/usr/share/dbus-1/"
	for target in modprobe insmod rmmod lsmod depmod modinfo; do
		ln -s ../bin/kmod "$root/usr/sbin/$target"
	done
	install -m 0755 /usr/bin/busybox "$root/usr/bin/busybox"
	# Real tools above win; busybox fills in the rest (sh, mount, poweroff...).
	for applet in $(/usr/bin/busybox --list); do
		[[ -e "$root/usr/bin/$applet" || -e "$root/usr/sbin/$applet" ]] || ln -s busybox "$root/usr/bin/$applet"
	done
	for target in /etc/protocols /etc/services /etc/ethertypes /etc/iproute2; do
		[[ -e "$target" ]] && cp -a "$target" "$root/etc/"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
	printf 'root:x:0:\n' >"$root/etc/group"
	printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"

	copy_modules "$root" "$kdir"
	install -m 0755 "$support/init.sh" "$root/init"
}

# copy_sources puts the repository's files (not .git, not ignored build
# output) under /src so tests find their testdata relative to cwd.
copy_sources() {
	local root=$1
	(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - -cf -) | tar -C "$root/src" -xf -
}

write_env() {
	local root=$1 modules
	modules=$(grep -v '^[[:space:]]*\(#\|$\)' "$support/modules" | tr '\n' ' ')
	cat >"$root/etc/cni-test.env" <<-EOF
		export CNI_TEST_FULL_KERNEL=1
		export CNI_TEST_BINARY=/opt/cni-test/bin/cni
		export CNI_TEST_CRASHPOINT_BINARY=/opt/cni-test/bin/cni-crashpoint
		export CNI_TEST_HELPER_DIR=/opt/cni-test/helpers
		export CNI_TEST_REFERENCE_DIR=/opt/cni-test/reference
		CNI_TEST_MODULES='$modules'
		CNI_TEST_TIMEOUT='$test_timeout'
		CNI_TEST_ARGS='${CNI_KERNEL_TEST_ARGS:-}'
		CNI_TEST_JOBS='${CNI_KERNEL_TEST_JOBS:-${CNI_KERNEL_VM_CPUS:-2}}'
	EOF
}

run_vm() {
	local kdir=$1 initrd=$2 out=$3 vmlinuz
	vmlinuz=$(ls -1 "$kdir"/boot/vmlinuz-* | head -n 1)
	log "booting $(basename "$vmlinuz") under qemu (TCG, timeout $vm_timeout)"
	# TCG, not KVM: KVM guests hang after the BIOS on this kind of host.
	timeout -k 30s "$vm_timeout" \
		qemu-system-x86_64 -accel tcg,thread=multi -cpu max \
		-smp "${CNI_KERNEL_VM_CPUS:-2}" -m "${CNI_KERNEL_VM_MEMORY:-4G}" \
		-nographic -no-reboot -nic none \
		-kernel "$vmlinuz" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=4 random.trust_cpu=on mitigations=off" \
		</dev/null 2>&1 | tee "$out"
}

work=""
cleanup() { [[ -z "$work" ]] || rm -rf "$work"; }

main() {
	local kdir status build_status=0 line
	ensure_host_tools
	kdir=$(fetch_kernel)
	work=$(mktemp -d "${TMPDIR:-/tmp}/cni-test-kernel.XXXXXX")
	trap cleanup EXIT
	mkdir -p "$work/root"

	local patterns="$work/kernel-tests"
	if [[ "${CNI_KERNEL_ALL_TESTS:-}" == 1 ]]; then
		patterns=""
	elif ! kernel_tests "$patterns" "${@:-./...}"; then
		log "the run here failed: every test of every package goes to the VM"
		patterns=""
	elif [[ ! -s "$patterns" ]]; then
		log "no test skips on this kernel for lack of a feature: nothing for the VM"
		exit 0
	fi
	build_go "$work/root" "$patterns" "${@:-./...}" || build_status=1
	make_root "$work/root" "$kdir"
	copy_sources "$work/root"
	write_env "$work/root"
	(cd "$work/root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0 | gzip -1) >"$work/initrd.gz"
	log "initramfs: $(du -h "$work/initrd.gz" | cut -f1)"

	local started=$SECONDS
	run_vm "$kdir" "$work/initrd.gz" "$work/console.log" || true
	cp "$work/console.log" "$cache/last-run.log"
	log "VM finished after $((SECONDS - started))s; console log kept in $cache/last-run.log"

	line=$(tr -d '\r' <"$work/console.log" | grep -a "^$marker " | tail -n 1) || true
	if [[ -z "$line" ]]; then
		log "FAIL: no $marker line from the VM (kernel panic, crash or timeout)"
		exit 1
	fi
	status=${line#*status=}
	status=${status%% *}
	if ((build_status != 0)); then
		log "FAIL: some packages did not build (see BUILD FAIL above)"
		exit 1
	fi
	[[ "$status" == 0 ]] || { log "FAIL: $line"; exit 1; }
	log "PASS: $line"
}

main "$@"; exit
