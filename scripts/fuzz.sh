#!/usr/bin/env bash
# fuzz.sh [-l]: runs every native Go fuzz target of the module, each for $FUZZTIME
# (default 3s), one `go test -fuzz` per target (Go fuzzes one target per invocation).
# Targets are found, not listed: every `func FuzzXxx(f *testing.F)` in a *_test.go file
# under the module (testdata/ and hidden directories excepted), so a new target runs
# without touching this script. With -l it only prints them, one "./PKGDIR FuzzXxx" a
# line. A crasher makes its target fail; Go writes the input to
# <pkg>/testdata/fuzz/FuzzXxx/, where a plain `go test` replays it from then on. Every
# target runs even after a failure; the exit status is 1 if any failed.
#
# Go before 1.27 can fail a target with a bare "context deadline exceeded" when the
# fuzztime deadline fires while a worker is mid-call on a loaded machine
# (golang/go#75804): nothing was found and no input is written. Such a failure, and only
# that one, is run again with a count budget (FUZZRETRY execs), which has no deadline to
# race; a crasher, a panic or any other failure is never retried.
#
# Environment: GO (default go), FUZZTIME (default 3s), FUZZRETRY (default 2000x),
# FUZZFLAGS (extra go test flags).
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-3s}
retrytime=${FUZZRETRY:-2000x}

targets() {
	# Nested modules (build tools) are not part of this module's `go test`.
	local nested
	# (No find -printf: the test-kernel VM's busybox find lacks it.)
	nested=$(find . -mindepth 2 -name go.mod | sed 's#go\.mod$##')
	find . \( -name testdata -o -name vendor -o -name '.?*' \) -prune -o -name '*_test.go' -print0 |
		xargs -0 -r grep -H -E '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' |
		sed -E 's#^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' |
		while read -r dir name; do
			for m in $nested; do
				case "$dir/" in "$m"*) continue 2 ;; esac
			done
			echo "$dir $name"
		done |
		sort -u
}

if [ "${1:-}" = "-l" ]; then
	targets
	exit 0
fi

list=$(targets)
if [ -z "$list" ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
# fuzz DIR NAME TIME: one go test -fuzz run, its output in $output and then on stdout
# (printed after the run, not teed: tee would reopen a redirected stdout and truncate it).
fuzz() {
	local status=0
	# shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
	output=$("$go" test ${FUZZFLAGS:-} -run '^$' -fuzz "^$2\$" -fuzztime "$3" "$1" 2>&1) || status=$?
	printf '%s\n' "$output"
	return "$status"
}

# deadline_race: whether $output is Go's fuzztime race and nothing else: the deadline
# message, and no written input, panic or test failure message beside it.
deadline_race() {
	grep -q '^    context deadline exceeded$' <<<"$output" &&
		! grep -q -E 'Failing input written|panic:|_test\.go:[0-9]+:|fuzzing process hung' <<<"$output"
}

failed=()
start=$SECONDS
while read -r dir name; do
	echo "== $dir $name ($fuzztime)"
	if fuzz "$dir" "$name" "$fuzztime"; then
		continue
	fi
	if deadline_race; then
		echo "== $dir $name: the fuzztime deadline race (golang/go#75804), again for $retrytime"
		if fuzz "$dir" "$name" "$retrytime"; then
			continue
		fi
	fi
	failed+=("$dir $name")
done <<<"$list"
echo "== fuzz: $(wc -l <<<"$list") targets in $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz.sh: FAILED %s\n' "${failed[@]}" >&2
	exit 1
fi
