#!/usr/bin/env bash
# Runs an already-built pjdfstest (the POSIX filesystem test suite,
# github.com/pjd/pjdfstest) against bucketfs and prints one row per test
# group: test files passed in full, subtests passed, and the percentage.
#
#   sudo bash scripts/pjdfstest.sh [PJDFSTEST_DIR] [GROUP ...]
#
# PJDFSTEST_DIR (or the PJDFSTEST_DIR environment variable) is a pjdfstest
# checkout where `pjdfstest` has been built (autoreconf -ifs && ./configure
# && make): the directory holding the `pjdfstest` binary and `tests/`. This
# script neither fetches nor builds it. GROUPs default to every directory
# under tests/ (chmod, chown, link, mkdir, ...).
#
# Must run as root: pjdfstest switches users and groups. Each group gets a
# fresh mount (`--allow-other -o default_permissions`, so the kernel checks
# permissions for the other users, a fresh prefix of the bucket and a fresh
# cache directory) over the wrapped emulator (scripts/emulator.sh, started
# under the name "pjdfstest" and stopped at the end), and runs
# `prove -r -v tests/GROUP` inside it. Logs go to .build/pjdfstest/.
#
# Environment: BUCKETFS_BIN (default: the debug build, built if needed),
# PJDFSTEST_MOUNT_OPTIONS (extra `bucketfs mount` options).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"

PJD="${1:-${PJDFSTEST_DIR:-}}"
[[ $# -gt 0 ]] && shift
if [[ -z "$PJD" || ! -x "$PJD/pjdfstest" || ! -d "$PJD/tests" ]]; then
    echo "usage: $0 PJDFSTEST_DIR [GROUP ...]  (a directory with a built pjdfstest binary and tests/)" >&2
    exit 64
fi
PJD="$(cd "$PJD" && pwd)"
if [[ "$(id -u)" != 0 ]]; then
    echo "pjdfstest.sh: run as root (pjdfstest switches users)" >&2
    exit 1
fi
command -v prove >/dev/null || { echo "pjdfstest.sh: prove (perl) is missing" >&2; exit 1; }

GROUPS_TO_RUN=("$@")
if ((${#GROUPS_TO_RUN[@]} == 0)); then
    mapfile -t GROUPS_TO_RUN < <(find "$PJD/tests" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
fi

bash scripts/setup.sh
if [[ -z "${BUCKETFS_BIN:-}" ]]; then
    swift build --product bucketfs >&2
    BUCKETFS_BIN="$(swift build --show-bin-path)/bucketfs"
fi

OUT="$REPO/.build/pjdfstest"
WORK="$(mktemp -d /tmp/bucketfs-pjdfstest.XXXXXX)"
mkdir -p "$OUT"
MNT=""

cleanup() {
    set +e
    if [[ -n "$MNT" ]]; then
        cd /
        fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
    fi
    bash "$REPO/scripts/emulator.sh" stop --name pjdfstest
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash scripts/emulator.sh stop --name pjdfstest
bash scripts/emulator.sh start --name pjdfstest
ENDPOINT="http://127.0.0.1:$(cat .build/servers/pjdfstest/port)"

# shellcheck disable=SC2086 # PJDFSTEST_MOUNT_OPTIONS is a list of options
mount_fresh() {
    local group="$1"
    MNT="$WORK/mnt-$group"
    mkdir -p "$MNT" "$WORK/cache-$group"
    chmod 0755 "$WORK"
    "$BUCKETFS_BIN" mount --anonymous --endpoint "$ENDPOINT" --cache-dir "$WORK/cache-$group" \
        --allow-other -o default_permissions --log-file "$OUT/$group.mount.log" --log-level warning \
        ${PJDFSTEST_MOUNT_OPTIONS:-} "gs://bucketfs-test/pjdfstest-$group-$$" "$MNT"
}

unmount_current() {
    cd /
    fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
    MNT=""
}

# One row from a `prove -v` log: files fully passed, files, subtests
# passed, subtests planned (a file that died early counts its missing
# subtests as failed). A failed TODO subtest (`not ok N # TODO`: one the
# suite expects to fail on this OS, e.g. Linux keeping SUID/SGID bits of a
# directory on chown) passes, as prove counts it.
summarize() {
    awk '
        /^\/.*\.t \.\./ { files++; if (started) finish(); started = 1; plan = 0; ok = 0; next }
        /^1\.\.[0-9]+/ { split($0, p, "."); plan = p[3] + 0; next }
        /^ok [0-9]+/ || /^not ok [0-9]+ # TODO/ { ok++; next }
        function finish() { passed += ok; planned += (plan > ok ? plan : ok); if (plan > 0 && ok >= plan) full++ }
        END { if (started) finish(); printf "%d %d %d %d\n", full, files, passed, planned }
    ' "$1"
}

printf '%-16s %11s %15s %7s %8s\n' group files subtests "%" seconds
total_full=0 total_files=0 total_passed=0 total_planned=0
for group in "${GROUPS_TO_RUN[@]}"; do
    [[ -d "$PJD/tests/$group" ]] || { echo "pjdfstest.sh: no group $group" >&2; exit 64; }
    mount_fresh "$group"
    started=$SECONDS
    (cd "$MNT" && prove -r -v "$PJD/tests/$group") >"$OUT/$group.log" 2>&1 || true
    elapsed=$((SECONDS - started))
    unmount_current
    read -r full files passed planned < <(summarize "$OUT/$group.log")
    pct="$(awk -v p="$passed" -v t="$planned" 'BEGIN { printf "%.1f", t ? 100 * p / t : 0 }')"
    printf '%-16s %5d/%-5d %7d/%-7d %7s %8d\n' "$group" "$full" "$files" "$passed" "$planned" "$pct" "$elapsed"
    total_full=$((total_full + full)) total_files=$((total_files + files))
    total_passed=$((total_passed + passed)) total_planned=$((total_planned + planned))
done
pct="$(awk -v p="$total_passed" -v t="$total_planned" 'BEGIN { printf "%.1f", t ? 100 * p / t : 0 }')"
printf '%-16s %5d/%-5d %7d/%-7d %7s\n' total "$total_full" "$total_files" "$total_passed" "$total_planned" "$pct"
echo "logs: $OUT/GROUP.log (prove -v), $OUT/GROUP.mount.log" >&2
