#!/usr/bin/busybox sh
# /init of the test-kernel VM (see scripts/test-kernel.sh): set up a minimal
# root, load the network modules, run every test binary listed in
# /tests/list, print a per-package summary and the result marker the host
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
echo "test-kernel: iptables: $(iptables --version 2>&1); nft: $(nft --version 2>&1)"

summary=/tmp/summary
: > "$summary"
status=0
passed=0
failed=0
[ -n "$failed_modules" ] && status=1

while read -r pkg dir bin; do
	[ -n "$pkg" ] || continue
	echo "=== PACKAGE $pkg"
	start=$(date +%s)
	# Tests read testdata relative to their package directory, as under go test.
	(cd "/src/$dir" && "/tests/$bin" -test.count=1 -test.v -test.timeout="$CNI_TEST_TIMEOUT" $CNI_TEST_ARGS)
	rc=$?
	took=$(($(date +%s) - start))
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "PASS  $pkg (${took}s)" >> "$summary"
	else
		failed=$((failed + 1))
		status=1
		echo "FAIL  $pkg (${took}s, exit $rc)" >> "$summary"
	fi
done < /tests/list

echo "=== SUMMARY (full kernel $(uname -r))"
cat "$summary"
[ -n "$failed_modules" ] && echo "FAIL  module load:$failed_modules"
echo "CNI-KERNEL-TEST-RESULT status=$status passed=$passed failed=$failed"
sync
poweroff -f
# poweroff should not return; if it does, a panic with panic=-1 still ends qemu.
echo o > /proc/sysrq-trigger
