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
# Environment: GO (default go), FUZZTIME (default 3s), FUZZFLAGS (extra go test flags).
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-3s}

targets() {
	# Nested modules (build tools) are not part of this module's `go test`.
	local nested
	nested=$(find . -mindepth 2 -name go.mod -printf '%h/\n')
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
failed=()
start=$SECONDS
while read -r dir name; do
	echo "== $dir $name ($fuzztime)"
	# shellcheck disable=SC2086 # FUZZFLAGS is a list of flags
	if ! "$go" test ${FUZZFLAGS:-} -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" "$dir"; then
		failed+=("$dir $name")
	fi
done <<<"$list"
echo "== fuzz: $(wc -l <<<"$list") targets in $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz.sh: FAILED %s\n' "${failed[@]}" >&2
	exit 1
fi
