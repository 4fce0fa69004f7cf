#!/usr/bin/env bash
# Installs bucketfs:
#   bash scripts/install.sh [--binary PATH] [PREFIX]
#
# PREFIX defaults to /usr/local. What goes where:
#   PREFIX/bin/bucketfs                           the command
#   PREFIX/sbin/mount.fuse.bucketfs               mount(8)'s helper for type fuse.bucketfs
#   PREFIX/share/man/man1/bucketfs.1              the man page
#   PREFIX/share/bash-completion/completions/bucketfs
#   PREFIX/share/zsh/site-functions/_bucketfs
#   PREFIX/share/fish/vendor_completions.d/bucketfs.fish
#
# Without --binary (or BUCKETFS_BINARY) it runs `swift build -c release`
# and installs that build; with it, nothing is built. The man page and the
# completion scripts are the binary's own (`bucketfs print-manual-page`,
# `bucketfs --generate-completion-script bash|zsh|fish`).
#
# The mount helper: mount(8) runs /sbin/mount.fuse.bucketfs for
# `mount -t fuse.bucketfs` and fstab lines of that type, else /sbin/mount.fuse
# (fuse3's mount.fuse3), which runs `bucketfs` from the PATH mount(8) gives
# its helpers, /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# whatever the caller's PATH is. The helper installed here runs mount.fuse3
# with PREFIX/bin first in PATH, so it mounts with this install. mount(8)
# looks for helpers in /sbin only: when PREFIX/bin is not in mount(8)'s PATH
# and PREFIX/sbin is not /sbin, the script prints the link to make.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"

usage() {
    sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 64
}

fail() {
    printf 'install: %s\n' "$*" >&2
    exit 1
}

BINARY="${BUCKETFS_BINARY:-}"
PREFIX=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) [[ $# -ge 2 ]] || usage; BINARY="$2"; shift 2 ;;
        -h | --help) usage ;;
        -*) printf 'install: unknown option %s\n' "$1" >&2; usage ;;
        *) [[ -z "$PREFIX" ]] || usage; PREFIX="$1"; shift ;;
    esac
done
PREFIX="${PREFIX:-/usr/local}"
[[ "$PREFIX" != *"'"* ]] || fail "PREFIX may not contain a single quote: $PREFIX"
mkdir -p "$PREFIX"
PREFIX="$(cd "$PREFIX" && pwd)"

# What mounting needs at run time, with the Debian package that has it.
MOUNT_FUSE3="$(command -v mount.fuse3 || true)"
[[ -n "$MOUNT_FUSE3" ]] || MOUNT_FUSE3="$(ls /usr/sbin/mount.fuse3 /sbin/mount.fuse3 2>/dev/null | head -n 1 || true)"
missing=()
[[ -n "$MOUNT_FUSE3" ]] || missing+=("mount.fuse3 (apt-get install fuse3)")
command -v fusermount3 >/dev/null 2>&1 || missing+=("fusermount3 (apt-get install fuse3)")
[[ -e /dev/fuse ]] || missing+=("/dev/fuse (the fuse kernel module: modprobe fuse)")
if [[ ${#missing[@]} -gt 0 ]]; then
    printf 'install: missing: %s\n' "${missing[@]}" >&2
    exit 1
fi

# Paths given relative to where the script was started.
[[ -z "$BINARY" || "$BINARY" == /* ]] || BINARY="$PWD/$BINARY"
cd "$REPO"
if [[ -z "$BINARY" ]]; then
    swift build -c release --product bucketfs
    BINARY="$(swift build -c release --show-bin-path)/bucketfs"
fi
[[ -x "$BINARY" ]] || fail "no executable at $BINARY"
if ! "$BINARY" --help >/dev/null 2>&1; then
    libs="$(ldd "$BINARY" 2>/dev/null | awk '/not found/ { print $1 }' | tr '\n' ' ')"
    fail "$BINARY does not run${libs:+; libraries not found: $libs(libfuse3.so.3: apt-get install libfuse3-3; libcurl.so.4: apt-get install libcurl4)}"
fi
install -d "$PREFIX/bin" "$PREFIX/sbin" "$PREFIX/share/man/man1" \
    "$PREFIX/share/bash-completion/completions" "$PREFIX/share/zsh/site-functions" \
    "$PREFIX/share/fish/vendor_completions.d"
install -m 0755 "$BINARY" "$PREFIX/bin/bucketfs.new"
mv -f "$PREFIX/bin/bucketfs.new" "$PREFIX/bin/bucketfs"
INSTALLED="$PREFIX/bin/bucketfs"

# The man page's date is the commit's, so that a page written twice is the same.
date_args=()
if commit_date="$(git -C "$REPO" log -1 --format=%cs 2>/dev/null)" && [[ -n "$commit_date" ]]; then
    date_args=(--date "$commit_date")
fi
"$INSTALLED" print-manual-page "${date_args[@]}" >"$PREFIX/share/man/man1/bucketfs.1.new"
mv -f "$PREFIX/share/man/man1/bucketfs.1.new" "$PREFIX/share/man/man1/bucketfs.1"

"$INSTALLED" --generate-completion-script bash >"$PREFIX/share/bash-completion/completions/bucketfs"
"$INSTALLED" --generate-completion-script zsh >"$PREFIX/share/zsh/site-functions/_bucketfs"
"$INSTALLED" --generate-completion-script fish >"$PREFIX/share/fish/vendor_completions.d/bucketfs.fish"

HELPER="$PREFIX/sbin/mount.fuse.bucketfs"
cat >"$HELPER.new" <<EOF
#!/bin/sh
# mount(8)'s helper for type fuse.bucketfs (mount -t fuse.bucketfs, fstab),
# written by bucketfs's scripts/install.sh. mount(8) runs it as
#   mount.fuse.bucketfs SOURCE MOUNTPOINT [-o OPTIONS]
# mount.fuse3 (package fuse3) drops the options meant for mount(8) and runs
# \`bucketfs SOURCE MOUNTPOINT -o OPTIONS\` from PATH: this install's first.
PATH='$PREFIX/bin':"\${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"
export PATH
exec '$MOUNT_FUSE3' "\$@" -t fuse.bucketfs
EOF
chmod 0755 "$HELPER.new"
mv -f "$HELPER.new" "$HELPER"

printf 'install: bucketfs installed in %s\n' "$PREFIX"
# mount(8) runs /sbin/mount.fuse (which finds bucketfs in its own PATH) when
# /sbin has no mount.fuse.bucketfs.
sbin_real="$(cd "$PREFIX/sbin" && pwd -P)"
bin_real="$(cd "$PREFIX/bin" && pwd -P)"
mount_path_bins=()
for dir in /usr/local/bin /usr/bin /bin; do
    [[ -d "$dir" ]] && mount_path_bins+=("$(cd "$dir" && pwd -P)")
done
if [[ "$sbin_real" != "$(cd /sbin && pwd -P)" && " ${mount_path_bins[*]} " != *" $bin_real "* ]]; then
    printf 'install: mount(8) looks for helpers in /sbin only and runs them with its own PATH, which lacks %s;\n' "$PREFIX/bin" >&2
    printf 'install: for mount -t fuse.bucketfs and fstab lines to use this install:\n' >&2
    printf '  ln -sf %s /sbin/mount.fuse.bucketfs\n' "$HELPER" >&2
fi
