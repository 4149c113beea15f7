#!/bin/sh
# install-symlinks.sh: install the multi-call `cni` binary into a CNI plugin
# directory and give every plugin it holds its own name there (symlink,
# hardlink or copy), for `make install` and image builders with a shell.
#
# A wrapper of `cni install` (internal/runtime/install), which does the work:
# this script finds a cni to run, maps its flags and $DESTDIR to those of
# `cni install --conf-dir=` (no configs) and execs it. See docs/operators.md.
#
# POSIX sh; runs under dash and bash.

set -eu

prog=install-symlinks

usage() {
	cat <<EOF
Usage: $prog [--dir DIR] [--binary PATH] [--mode symlink|hardlink|copy]
       [--dry-run] [--only a,b] [--skip a,b] [--force] [--uninstall]
       [--list-file FILE] [--no-verify]

Installs BINARY as DIR/cni and one entry per plugin name in DIR, by running
\`BINARY install\` (under --uninstall without BINARY, DIR/cni; under
--list-file, the cni on PATH or <repo>/bin/cni, since BINARY may not run here).

  --dir DIR         plugin directory (default /opt/cni/bin; \$DESTDIR is prefixed)
  --binary PATH     the cni binary (default ./bin/cni, else <repo>/bin/cni)
  --mode MODE       symlink (default, relative to cni), hardlink or copy
  --dry-run         print what would be done, change nothing
  --only a,b        handle only these names (unknown names are an error)
  --skip a,b        leave these names alone
  --force           replace entries not installed by cni at any name, not only
                    the reference plugins' (kept in DIR/.cni-replaced all the same)
  --uninstall       remove our entries, put back the files we replaced, then
                    DIR/cni; foreign files stay
  --list-file FILE  plugin names, one per line, instead of running BINARY --list
                    (for cross-arch image builds; implies --no-verify)
  --no-verify       do not run CNI_COMMAND=VERSION on the installed names
EOF
}

die() {
	echo "$prog: error: $*" >&2
	exit 1
}

usage_error() {
	echo "$prog: $*" >&2
	usage >&2
	exit 2
}

dir=/opt/cni/bin
binary=
mode=symlink
only=
skip=
list_file=
dry_run=0
force=0
uninstall=0
no_verify=0

need_arg() {
	[ "$#" -ge 2 ] || usage_error "option $1 needs an argument"
}

while [ "$#" -gt 0 ]; do
	case $1 in
	--dir) need_arg "$@"; dir=$2; shift ;;
	--dir=*) dir=${1#*=} ;;
	--binary) need_arg "$@"; binary=$2; shift ;;
	--binary=*) binary=${1#*=} ;;
	--mode) need_arg "$@"; mode=$2; shift ;;
	--mode=*) mode=${1#*=} ;;
	--only) need_arg "$@"; only=$2; shift ;;
	--only=*) only=${1#*=} ;;
	--skip) need_arg "$@"; skip=$2; shift ;;
	--skip=*) skip=${1#*=} ;;
	--list-file) need_arg "$@"; list_file=$2; shift ;;
	--list-file=*) list_file=${1#*=} ;;
	--dry-run) dry_run=1 ;;
	--force) force=1 ;;
	--uninstall) uninstall=1 ;;
	--no-verify) no_verify=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage_error "unknown argument: $1" ;;
	esac
	shift
done

case $mode in
symlink | hardlink | copy) ;;
*) usage_error "--mode must be symlink, hardlink or copy, not '$mode'" ;;
esac
[ -n "$dir" ] || usage_error "--dir must not be empty"

repo_root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "$binary" ]; then
	binary=$repo_root/bin/cni
	[ -e ./bin/cni ] && binary=./bin/cni
fi

# runs PATH: an executable file, not the binary under --list-file (which may be
# another architecture's).
runs() {
	[ -f "$1" ] && [ -x "$1" ] && { [ -z "$list_file" ] || ! [ "$1" -ef "$binary" ]; }
}

if [ -n "$list_file" ]; then
	cni=$(command -v cni || true)
	runs "$cni" || cni=$repo_root/bin/cni
	runs "$cni" || die "--list-file: no cni that runs here to install $binary (put one on PATH)"
elif runs "$binary"; then
	cni=$binary
else
	# Uninstalling needs no new binary: the installed one does it. $DESTDIR is
	# prefixed to DIR as cni install does (install.Staged).
	destdir=${DESTDIR:-}
	case $dir in "${destdir%/}"/*) cni=$dir/cni ;; *) cni=${destdir%/}$dir/cni ;; esac
	[ "$uninstall" = 1 ] && runs "$cni" ||
		die "binary $binary not found or not executable (use --binary or --list-file)"
fi

exec "$cni" install --conf-dir= --destdir "${DESTDIR:-}" --dir "$dir" --binary "$binary" --mode "$mode" \
	--only "$only" --skip "$skip" --list-file "$list_file" \
	--dry-run="$dry_run" --force="$force" --uninstall="$uninstall" --no-verify="$no_verify"
