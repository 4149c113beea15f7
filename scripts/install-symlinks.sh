#!/bin/sh
# install-symlinks.sh: install the multi-call `cni` binary into a CNI plugin
# directory and give every plugin it holds its own name there (symlink,
# hardlink or copy).
#
# Why the care: runtimes exec plugins from this directory at any moment, and
# DaemonSet rollouts overlap. So the binary is put in place first, every entry
# is written under a unique temporary name inside DIR and renamed over the
# final name (never rm first, never a half-written binary, never a dangling
# link), and files that other vendors own are left alone unless --force; but
# for the reference plugins' (a kubeadm node's kubernetes-cni package): those
# are taken over, each kept in DIR/.cni-replaced (a hardlink, made before ours
# is renamed over it) for --uninstall to put back. `cni install` does the same
# (internal/runtime/install); scripts/install_test.go holds the two alike.
#
# POSIX sh plus coreutils (mktemp, readlink, cmp); runs under dash and bash.

set -eu

prog=install-symlinks

usage() {
	cat <<EOF
Usage: $prog [--dir DIR] [--binary PATH] [--mode symlink|hardlink|copy]
       [--dry-run] [--only a,b] [--skip a,b] [--force] [--uninstall]
       [--list-file FILE] [--no-verify]

Installs BINARY as DIR/cni and one entry per plugin name in DIR.

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

# say prints one line per action; under --dry-run it says what would happen.
say() {
	if [ "$dry_run" = 1 ]; then
		echo "would $*"
	else
		echo "$*"
	fi
}

# ---- options -------------------------------------------------------------

dir=/opt/cni/bin
binary=
mode=symlink
dry_run=0
only=
skip=
force=0
uninstall=0
list_file=
verify=1

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
	--no-verify) verify=0 ;;
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

# Names are split on whitespace below; never let them glob.
set -f

# The path the runtime will see (absolute symlinks into it count as ours)
# versus the path we write to (staged under DESTDIR for packaging). A --dir
# that already starts with DESTDIR is not prefixed twice: `make install
# DESTDIR=x` both exports DESTDIR and may pass --dir x/opt/cni/bin.
destdir=${DESTDIR:-}
destdir=${destdir%/}
case $dir in
"$destdir"/*) final_dir=${dir#"$destdir"} ;;
*) final_dir=$dir; dir=$destdir$dir ;;
esac
target=$dir/cni
kept_dir=$dir/.cni-replaced

if [ -z "$binary" ]; then
	repo_root=$(cd "$(dirname "$0")/.." && pwd)
	if [ -e ./bin/cni ]; then
		binary=./bin/cni
	else
		binary=$repo_root/bin/cni
	fi
fi

# ---- helpers -------------------------------------------------------------

# The reference plugins' names: install.ReferenceNames in
# internal/runtime/install/reference.go says where they come from, and
# scripts/install_test.go holds this list equal to it. A file another
# installer put at one of them is taken over (kept in $kept_dir); at any other
# name it is refused unless --force.
reference_names='bridge dummy host-device ipvlan loopback macvlan ptp tap vlan
dhcp host-local static
bandwidth firewall portmap sbr tuning vrf
flannel'

is_reference() {
	for r in $reference_names; do
		[ "$r" = "$1" ] && return 0
	done
	return 1
}

# valid_name rejects anything that could escape DIR or hide as a dotfile.
valid_name() {
	case $1 in
	'' | .* | cni | *[!A-Za-z0-9._-]*) return 1 ;;
	esac
	return 0
}

# in_list NAME "a,b,c"
in_list() {
	case ",$2," in
	*",$1,"*) return 0 ;;
	esac
	return 1
}

# same_file A B: both exist and are the same inode.
same_file() {
	[ -e "$1" ] && [ -e "$2" ] && [ "$1" -ef "$2" ]
}

# exists PATH: anything is there, a dangling symlink too.
exists() {
	[ -e "$1" ] || [ -L "$1" ]
}

# same_entry A B: one entry under two names, a non-link inode or two symlinks
# to one target (putting a symlink back recreates it).
same_entry() {
	if [ -L "$1" ] && [ -L "$2" ]; then
		[ "$(readlink "$1")" = "$(readlink "$2")" ]
		return
	fi
	[ ! -L "$1" ] && [ ! -L "$2" ] && same_file "$1" "$2"
}

# points_at_cni PATH: a symlink whose target is our binary.
points_at_cni() {
	[ -L "$1" ] || return 1
	link=$(readlink "$1") || return 1
	case $link in
	cni | ./cni | "$final_dir/cni" | "$dir/cni") return 0 ;;
	esac
	return 1
}

# is_cni_build PATH: a build of cni, of any version. Go writes the main
# package's path into every binary (the "path" line of `go version -m`), and no
# other project's plugin holds ours; cni install looks for the same line
# (buildLine in internal/runtime/install/owner.go).
is_cni_build() {
	LC_ALL=C grep -q "$(printf 'path\tgithub\\.com/cnikit/cni/cmd/cni$')" "$1" 2>/dev/null
}

# is_ours PATH: a symlink to cni, a hardlink of DIR/cni or of BINARY, a file
# identical to one of them, or else any build of cni. BINARY counts so that a
# removed DIR/cni is still recognised; any build, so that the hardlinks and
# copies of an older cni that an interrupted upgrade or one run with --only
# leaves beside the new one are ours too, never a file to keep in
# .cni-replaced in place of the reference plugin there.
is_ours() {
	if [ -L "$1" ]; then
		points_at_cni "$1"
		return
	fi
	[ -f "$1" ] || return 1
	for ref in "$target" "$binary"; do
		[ -f "$ref" ] || continue
		if same_file "$1" "$ref" || cmp -s "$1" "$ref"; then
			return 0
		fi
	done
	is_cni_build "$1"
}

work=
cleanup() {
	if [ -n "$work" ]; then
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# workdir makes one private directory inside DIR for this run's temporary
# entries: same filesystem (so rename is atomic), unique (so overlapping runs
# never clobber each other), and removed on exit.
workdir() {
	if [ -z "$work" ]; then
		work=$(mktemp -d "$dir/.cni-install.XXXXXX") ||
			die "cannot create a temporary directory in $dir"
	fi
}

# Prefer mv -T so a symlink-to-directory at the final name is replaced, not
# moved into; fall back to plain mv where -T is missing (directories are
# refused before we get here).
mv_t=
probe_mv() {
	touch "$work/.probe-a"
	if mv -T "$work/.probe-a" "$work/.probe-b" 2>/dev/null; then
		mv_t=-T
	fi
	rm -f "$work/.probe-a" "$work/.probe-b"
}

# commit SRC DEST renames a fully written entry over DEST in one step.
commit() {
	# shellcheck disable=SC2086 # $mv_t is empty or one flag
	mv -f $mv_t "$1" "$2" || die "cannot rename $1 to $2"
}

flush() {
	if command -v sync >/dev/null 2>&1; then
		sync "$1" 2>/dev/null || sync
	fi
}

# ---- plugin names ----------------------------------------------------------

read_names() {
	if [ -n "$list_file" ]; then
		[ -r "$list_file" ] || die "cannot read list file $list_file"
		raw=$(cat "$list_file")
	elif [ -x "$binary" ] && [ ! -d "$binary" ]; then
		raw=$("$binary" --list) ||
			die "$binary --list failed (use --list-file for a binary that cannot run here)"
	elif [ "$uninstall" = 1 ] && [ -x "$target" ]; then
		# Uninstalling needs no new binary: ask the installed one.
		raw=$("$target" --list) || die "$target --list failed"
	else
		die "binary $binary not found or not executable (use --binary or --list-file)"
	fi

	names=
	# Blank lines and #-comments are allowed in list files.
	for n in $(printf '%s\n' "$raw" | sed -e 's/#.*//'); do
		valid_name "$n" || die "invalid plugin name '$n'"
		in_list "$n" "$names" && continue
		names=${names:+$names,}$n
	done
	[ -n "$names" ] || die "no plugin names found"

	if [ -n "$only" ]; then
		for n in $(echo "$only" | tr ',' ' '); do
			in_list "$n" "$names" || die "unknown plugin name in --only: $n"
		done
	fi
	for n in $(echo "$skip" | tr ',' ' '); do
		in_list "$n" "$names" || echo "$prog: warning: --skip $n: no such plugin name" >&2
	done

	selected=
	for n in $(echo "$names" | tr ',' ' '); do
		if [ -n "$only" ] && ! in_list "$n" "$only"; then
			continue
		fi
		if in_list "$n" "$skip"; then
			continue
		fi
		selected="$selected $n"
	done
}

# ---- uninstall -------------------------------------------------------------

# restore_original NAME puts the file install kept for NAME back over our
# entry (or where it is gone) in one rename. A foreign file someone put there
# since stays, and so does the kept one; an entry that is the kept one already
# (a run interrupted after keeping it) only loses its second name.
given=
restore_original() {
	p=$dir/$1
	k=$kept_dir/$1
	if same_entry "$p" "$k"; then
		say "remove $k (the same file is at $p)"
		given="$given $1"
		[ "$dry_run" = 1 ] || rm -f "$k" || die "cannot remove $k"
		return 0
	fi
	if exists "$p" && ! is_ours "$p"; then
		echo "keep $p (not installed by cni); the file cni replaced there stays in $k"
		return 0
	fi
	say "restore $p (from $k)"
	given="$given $1"
	[ "$dry_run" = 1 ] && return 0
	mv -f "$k" "$p" || die "cannot rename $k to $p"
}

# remove_kept_dir removes $kept_dir once it holds nothing but what this run
# gave back. Its hidden entries are temporary names of a run interrupted while
# keeping a file; the file such a name holds is also at its own name.
remove_kept_dir() {
	[ -d "$kept_dir" ] && [ ! -L "$kept_dir" ] || return 0
	left=
	set +f
	for e in "$kept_dir"/*; do
		exists "$e" || continue
		case " $given " in *" ${e##*/} "*) continue ;; esac
		left="${left:+$left }${e##*/}"
	done
	set -f
	if [ -n "$left" ]; then
		echo "keep $kept_dir (still holds: [$left])"
		return 0
	fi
	say "remove directory $kept_dir"
	[ "$dry_run" = 1 ] && return 0
	set +f
	rm -f "$kept_dir"/.[!.]* "$kept_dir"/..?*
	set -f
	rmdir "$kept_dir" || die "cannot remove $kept_dir"
}

do_uninstall() {
	if [ ! -d "$dir" ]; then
		echo "nothing to do: $dir does not exist"
		return 0
	fi
	for n in $selected; do
		p=$dir/$n
		if exists "$kept_dir/$n"; then
			restore_original "$n"
			continue
		fi
		exists "$p" || continue
		if is_ours "$p"; then
			say "remove $p"
			[ "$dry_run" = 1 ] || rm -f "$p"
		else
			echo "keep $p (not installed by cni)"
		fi
	done
	remove_kept_dir

	[ -e "$target" ] || [ -L "$target" ] || return 0
	# Keep cni while anything of ours is left: symlinks to it would dangle,
	# and hardlinks or copies kept by --only/--skip would no longer be
	# recognised as ours by a later uninstall.
	users=
	for n in $(echo "$names" | tr ',' ' '); do
		case " $selected " in *" $n "*) continue ;; esac
		p=$dir/$n
		if [ -e "$p" ] || [ -L "$p" ]; then
			is_ours "$p" && users="$users $n"
		fi
	done
	set +f
	entries=$(printf '%s\n' "$dir"/* "$dir"/.[!.]*)
	set -f
	old_ifs=$IFS
	IFS='
'
	for p in $entries; do
		[ -L "$p" ] || continue
		n=${p##*/}
		# Selected names are gone already (or would be, under --dry-run).
		case " $selected $users " in *" $n "*) continue ;; esac
		points_at_cni "$p" && users="$users $n"
	done
	IFS=$old_ifs
	if [ -n "$users" ]; then
		echo "keep $target (still used by:$users)"
		return 0
	fi
	say "remove $target"
	[ "$dry_run" = 1 ] || rm -f "$target"
}

# ---- install ---------------------------------------------------------------

# check_foreign decides, before anything changes, what becomes of each entry
# that is not ours: at a reference plugin's name (any name under --force) it is
# taken over, kept for --uninstall; at any other name, or when it is a
# directory, the run is refused. It runs against the old DIR/cni so that
# hardlinks and copies of the previous version are still recognised as ours
# during an upgrade, never kept as someone else's.
takeover=
check_foreign() {
	refused=0
	for n in $selected; do
		p=$dir/$n
		if [ -d "$p" ] && [ ! -L "$p" ]; then
			echo "$prog: error: refusing to replace $p: it is a directory" >&2
			refused=1
			continue
		fi
		exists "$p" || continue
		is_ours "$p" && continue
		if [ "$force" = 1 ] || is_reference "$n"; then
			takeover="$takeover $n"
			continue
		fi
		if [ -L "$p" ]; then
			what="symlink to $(readlink "$p")"
		else
			what="file"
		fi
		echo "$prog: error: refusing to replace $p: $what not installed by cni (use --force)" >&2
		refused=1
	done
	[ "$refused" = 0 ] || exit 1
	[ -n "$takeover" ] && exists "$kept_dir" || return 0
	if [ -L "$kept_dir" ] || [ ! -d "$kept_dir" ]; then
		die "refusing to keep replaced files in $kept_dir: it is not a directory"
	fi
	for n in $takeover; do
		if [ -d "$kept_dir/$n" ] && [ ! -L "$kept_dir/$n" ]; then
			echo "$prog: error: refusing to keep $dir/$n as $kept_dir/$n: that is a directory" >&2
			refused=1
		fi
	done
	[ "$refused" = 0 ] || exit 1
}

# keep_original NAME puts a second name of the foreign entry at DIR/NAME into
# $kept_dir, flushed, before ours is renamed over DIR/NAME: at every moment
# DIR/NAME holds the original or ours, and the original has a name. A file is
# hardlinked (a plugin running it keeps it, and --uninstall's rename gives back
# that very inode); a symlink is recreated with its target. An original kept by
# an earlier run gives way to a newer foreign file (the kubernetes-cni package
# reinstalled over ours), so that --uninstall puts back what was there last.
keep_original() {
	p=$dir/$1
	k=$kept_dir/$1
	if exists "$k" && ! same_entry "$p" "$k"; then
		say "replace $p (kept as $k for --uninstall, in place of the older file kept there)"
	else
		say "replace $p (kept as $k for --uninstall)"
	fi
	# Kept already by a run interrupted before it replaced the entry.
	if [ "$dry_run" = 1 ] || same_entry "$p" "$k"; then
		return 0
	fi
	if [ ! -d "$kept_dir" ]; then
		mkdir "$kept_dir" || die "cannot create $kept_dir"
		flush "$dir"
	fi
	tmp=$work/kept-$1
	if [ -L "$p" ]; then
		ln -s "$(readlink "$p")" "$tmp"
	else
		ln "$p" "$tmp"
	fi || die "cannot keep $p as $tmp"
	commit "$tmp" "$k"
	flush "$kept_dir"
}

# install_binary puts BINARY at DIR/cni: write a private copy, make it
# executable, flush it, then rename it over the old one. Running plugins keep
# the old inode, so there is no "text file busy" and no half-written binary.
binary_changed=0
install_binary() {
	if [ -f "$target" ] && [ ! -L "$target" ] && cmp -s "$binary" "$target"; then
		if [ -x "$target" ]; then
			echo "unchanged $target"
			return 0
		fi
	fi
	binary_changed=1
	say "install $target (from $binary)"
	[ "$dry_run" = 1 ] && return 0
	tmp=$(mktemp "$work/cni.XXXXXX") || die "cannot create a temporary file in $work"
	cp "$binary" "$tmp" || die "cannot copy $binary to $tmp"
	chmod 0755 "$tmp"
	flush "$tmp"
	commit "$tmp" "$target"
}

# up_to_date NAME: the entry already is what this mode would create.
up_to_date() {
	p=$dir/$1
	case $mode in
	symlink)
		[ -L "$p" ] && [ "$(readlink "$p")" = cni ]
		;;
	hardlink)
		# Under --dry-run a binary about to change would break every hardlink.
		if [ "$dry_run" = 1 ] && [ "$binary_changed" = 1 ]; then
			return 1
		fi
		[ ! -L "$p" ] && same_file "$p" "$target"
		;;
	copy)
		# Under --dry-run DIR/cni is still the old binary; compare with the new.
		ref=$target
		[ "$dry_run" = 1 ] && ref=$binary
		[ ! -L "$p" ] && [ -f "$p" ] && [ -x "$p" ] && ! same_file "$p" "$target" && cmp -s "$p" "$ref"
		;;
	esac
}

# install_entry NAME writes the entry under a temporary name and renames it.
install_entry() {
	p=$dir/$1
	if up_to_date "$1"; then
		echo "unchanged $p"
		return 0
	fi
	case " $takeover " in *" $1 "*) keep_original "$1" ;; esac
	case $mode in
	symlink) say "link $p -> cni" ;;
	hardlink) say "hardlink $p => $target" ;;
	copy) say "copy $target to $p" ;;
	esac
	[ "$dry_run" = 1 ] && return 0
	tmp=$work/$1
	case $mode in
	symlink) ln -s cni "$tmp" ;;
	hardlink) ln "$target" "$tmp" ;;
	copy)
		cp "$target" "$tmp"
		chmod 0755 "$tmp"
		flush "$tmp"
		;;
	esac || die "cannot create $tmp"
	commit "$tmp" "$p"
}

verify_entries() {
	# A plugin that hangs must fail the install, not stall it.
	limit=
	if command -v timeout >/dev/null 2>&1; then
		limit="timeout 30"
	fi
	failed=0
	for n in $selected; do
		p=$dir/$n
		# shellcheck disable=SC2086 # $limit is empty or a command prefix
		if out=$(CNI_COMMAND=VERSION $limit "$p" </dev/null 2>&1) &&
			case $out in *'"cniVersion"'*) true ;; *) false ;; esac; then
			echo "verified $p"
		else
			echo "$prog: error: $p does not answer CNI_COMMAND=VERSION: $out" >&2
			failed=1
		fi
	done
	[ "$failed" = 0 ] || exit 1
}

do_install() {
	[ -f "$binary" ] || die "binary $binary not found"
	if [ -d "$dir" ]; then
		check_foreign
	else
		say "create directory $dir"
		[ "$dry_run" = 1 ] || mkdir -p "$dir" || die "cannot create $dir"
	fi
	if [ "$dry_run" = 0 ]; then
		workdir
		probe_mv
	fi
	install_binary
	for n in $selected; do
		install_entry "$n"
	done
	if [ "$dry_run" = 1 ]; then
		return 0
	fi
	# Make the renames themselves durable, not only the file contents.
	flush "$dir"
	if [ "$verify" = 1 ] && [ -z "$list_file" ]; then
		verify_entries
	else
		echo "skipped verification"
	fi
}

read_names
if [ "$uninstall" = 1 ]; then
	do_uninstall
else
	do_install
fi
