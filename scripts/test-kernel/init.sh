#!/usr/bin/busybox sh
# /init of the test-kernel VM (see scripts/test-kernel.sh): set up a minimal
# root, load the network modules, run every test binary listed in
# /tests/list (with its -test.run pattern, the tests that skip on the host's
# kernel, when the list gives one), print a per-package summary and the result marker the host
# parses, then power off. It runs under busybox sh inside the initramfs.

export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TMPDIR=/tmp
. /etc/cni-test.env

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/lib/cni
mkdir -p /run/netns /run/cni /run/xtables

# An oops must end the VM (panic=-1 reboots, -no-reboot exits qemu) so the
# host sees the missing result marker at once instead of at its timeout.
echo 1 > /proc/sys/kernel/panic_on_oops

ip link set lo up

failed_modules=""
for m in $CNI_TEST_MODULES; do
	modprobe "$m" || failed_modules="$failed_modules $m"
done
if [ -n "$failed_modules" ]; then
	echo "test-kernel: could not load modules:$failed_modules"
fi

echo "test-kernel: kernel $(uname -r), $(nproc) CPUs, $(grep MemTotal /proc/meminfo)"
echo "test-kernel: prebuilt test helpers: $(cd "$CNI_TEST_HELPER_DIR" 2>/dev/null && find . -type f | sed 's|^\./||' | tr '\n' ' ')"
echo "test-kernel: iptables: $(iptables --version 2>&1); nft: $(nft --version 2>&1)"

# run_package runs one test binary from its package directory (tests read
# testdata relative to it, as under go test) and records its verdict. With
# several lanes the output is buffered per package and printed whole under a
# lock, so packages never interleave on the console. In the second pass
# ($PASS = nofirewall) the binary runs under nofirewall, the firewall binaries
# hidden, and its verdict is recorded apart.
run_package() {
	pkg=$1 dir=$2 bin=$3 pattern=$4
	wrap="" key=$bin name=$pkg
	if [ "$PASS" = nofirewall ]; then
		wrap="/opt/cni-test/bin/nofirewall --" key=$bin.nofirewall name="$pkg (no firewall binaries)"
	fi
	log=/tmp/results/$key.log
	start=$(date +%s)
	if [ "$CNI_TEST_JOBS" -gt 1 ]; then
		(cd "/src/$dir" && $wrap "/tests/$bin" -test.count=1 -test.v -test.timeout="$CNI_TEST_TIMEOUT" ${pattern:+-test.run="$pattern"} $CNI_TEST_ARGS) > "$log" 2>&1
		rc=$?
	else
		echo "=== PACKAGE $name"
		(cd "/src/$dir" && $wrap "/tests/$bin" -test.count=1 -test.v -test.timeout="$CNI_TEST_TIMEOUT" ${pattern:+-test.run="$pattern"} $CNI_TEST_ARGS)
		rc=$?
	fi
	took=$(($(date +%s) - start))
	if [ "$rc" -eq 0 ]; then
		verdict="PASS  $name (${took}s)"
	else
		verdict="FAIL  $name (${took}s, exit $rc)"
	fi
	echo "$verdict" > "/tmp/results/$key.verdict"
	if [ "$CNI_TEST_JOBS" -gt 1 ]; then
		# mkdir is atomic: the lane that creates the directory owns the console.
		until mkdir /tmp/results/console.lock 2>/dev/null; do sleep 1; done
		echo "=== PACKAGE $name"
		cat "$log"
		echo "=== $verdict"
		rmdir /tmp/results/console.lock
	fi
}

# lane runs every CNI_TEST_JOBS-th package of list $2, starting at $1: like
# go test ./..., packages run side by side, each on its own.
lane() {
	i=0
	while read -r pkg dir bin pattern; do
		[ -n "$pkg" ] || continue
		[ $((i % CNI_TEST_JOBS)) -eq "$1" ] && run_package "$pkg" "$dir" "$bin" "$pattern"
		i=$((i + 1))
	done < "$2"
}

# run_pass runs the packages of list $1 in CNI_TEST_JOBS lanes.
run_pass() {
	l=0
	while [ "$l" -lt "$CNI_TEST_JOBS" ]; do
		lane "$l" "$1" &
		l=$((l + 1))
	done
	wait
}

mkdir -p /tmp/results
PASS=full
run_pass /tests/list
PASS=nofirewall
run_pass /tests/nofirewall.list

status=0
passed=0
failed=0
echo "=== SUMMARY (full kernel $(uname -r))"
while read -r pkg dir bin pattern; do
	[ -n "$pkg" ] || continue
	if [ -f "/tmp/results/$bin.verdict" ]; then
		verdict=$(cat "/tmp/results/$bin.verdict")
	else
		verdict="FAIL  $pkg (no verdict recorded)"
	fi
	echo "$verdict"
	case $verdict in
	PASS*) passed=$((passed + 1)) ;;
	*) failed=$((failed + 1)) status=1 ;;
	esac
done < /tests/list
while read -r pkg dir bin pattern; do
	[ -n "$pkg" ] || continue
	if [ -f "/tmp/results/$bin.nofirewall.verdict" ]; then
		verdict=$(cat "/tmp/results/$bin.nofirewall.verdict")
	else
		verdict="FAIL  $pkg (no firewall binaries; no verdict recorded)"
	fi
	echo "$verdict"
	case $verdict in
	PASS*) passed=$((passed + 1)) ;;
	*) failed=$((failed + 1)) status=1 ;;
	esac
done < /tests/nofirewall.list
if [ -n "$failed_modules" ]; then
	echo "FAIL  module load:$failed_modules"
	status=1
fi
echo "CNI-KERNEL-TEST-RESULT status=$status passed=$passed failed=$failed"
sync
poweroff -f
# poweroff should not return; if it does, a panic with panic=-1 still ends qemu.
echo o > /proc/sysrq-trigger
