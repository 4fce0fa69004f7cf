#!/usr/bin/env bash
# The benchmark (docs/performance.md): bash scripts/bench.sh
#
# Prints one table: every workload at a round-trip time of 0 ms (loopback)
# and of 20 ms (through scripts/bench/delay_proxy.py, which delays each
# direction by half the round trip and charges one round trip per new
# connection; this kernel has no netem), each measured in one run for
#   curl     the same transfers straight against the JSON API (the server's
#            limit; one curl process per workload, connections kept alive);
#   bucketfs the release build, mounted fresh (empty cache dir) for each
#            group of workloads, so "cold" is cold;
#   rclone   `rclone mount` from Debian, a `google cloud storage` remote with
#            anonymous = true and the same endpoint, fresh mount and cache
#            dir per group; default VFS settings (--vfs-cache-mode off) for
#            reads, --vfs-cache-mode writes for writes (without it rclone
#            refuses writes that are not purely sequential).
#
# Run from a fresh clone: it runs scripts/setup.sh (Debian packages, the
# venv with the pinned emulator), builds `swift build -c release --product
# bucketfs`, starts its own servers on loopback and stops them at the end.
#
# Workloads are row groups in scripts/bench/rows/*.sh (in name order); a
# group declares its rows and measures them (see scripts/bench/lib.sh and
# any row file). Adding a row: add a file there, or a function to one.
#
# Environment:
#   BENCH_RTTS="0 20"      round-trip times in ms, one round each
#   BENCH_GROUPS="..."     only these groups (names as in the row files)
#   BENCH_BIN=PATH         measure that binary instead of building one
#   BENCH_SCRATCH=DIR      build with --scratch-path DIR
#   BENCH_TIMEOUT=S        limit of one measured command (default 300 s)
#   BENCH_RCLONE=0         leave rclone out
#   BENCH_SERVER=fake-gcs-server (default) or emulator: the server every
#                          row but the scale and Firebase ones runs on
#                          (docs/performance.md says why the default)
#
# Output: the table on stdout, also in .build/bench/results.md; the details
# of the run (every command, the emulator's requests per cell, memory) in
# .build/bench/bench.log. A workload that fails shows "error" in its cell
# and the script exits 1 after printing the table. On exit (also on failure
# or Ctrl-C) every mount made here is unmounted, every process started
# here stopped by its PID, the emulator stopped.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"
OUT_DIR="$REPO/.build/bench"
LOG="$OUT_DIR/bench.log"
RESULTS="$OUT_DIR/results.md"
HELPER="$REPO/scripts/bench/bench_helper.py"
PY="$REPO/.build/venv/bin/python"
BUCKET=bucketfs-test
WORKLOAD_TIMEOUT="${BENCH_TIMEOUT:-300}"
read -r -a RTTS <<<"${BENCH_RTTS:-0 20}"
WORK=""
RTT=0
BASE=""
BUCKETFS_FLAGS=()
RCLONE_FLAGS=()

# shellcheck source=scripts/bench/lib.sh
source "$REPO/scripts/bench/lib.sh"
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT_DIR"
: >"$LOG"
rm -f "$OUT_DIR"/bucketfs-*.log "$OUT_DIR"/rclone-*.log "$OUT_DIR"/proxy-*.log "$RESULTS"
WORK="$(mktemp -d /tmp/bucketfs-bench.XXXXXX)"

for file in "$REPO"/scripts/bench/rows/*.sh; do
    # shellcheck source=/dev/null
    source "$file"
done
if [[ -n "${BENCH_GROUPS:-}" ]]; then
    read -r -a GROUPS_ <<<"$BENCH_GROUPS"
fi
COLUMNS_=(bucketfs rclone)
[[ "${BENCH_RCLONE:-1}" != 0 ]] || COLUMNS_=(bucketfs)

say "setup"
bash scripts/setup.sh
if [[ -n "${BENCH_BIN:-}" ]]; then
    say "using BENCH_BIN=$BENCH_BIN (no build)"
    BIN="$BENCH_BIN"
    BIN_KIND="binary $BENCH_BIN"
else
    scratch=()
    [[ -z "${BENCH_SCRATCH:-}" ]] || scratch=(--scratch-path "$BENCH_SCRATCH")
    say "building bucketfs (release)"
    swift build -c release --product bucketfs "${scratch[@]}"
    BIN="$(swift build -c release --show-bin-path "${scratch[@]}")/bucketfs"
    BIN_KIND="release build"
fi
BIN="$(readlink -f "$BIN")"
[[ -x "$BIN" ]] || { echo "bench: no bucketfs binary at $BIN" >&2; exit 1; }

say "starting the benchmark server ($BENCH_SERVER)"
start_bench_server
EMU_PORT="${EMU_BASE##*:}"

commit="$(git rev-parse --short HEAD 2>/dev/null || echo 'no commit yet')"
if [[ -n "$(git status --porcelain 2>/dev/null | sed -n 1p)" ]]; then
    commit+=" (+ uncommitted changes)"
fi
rclone_version="$(rclone version 2>/dev/null | sed -n 1p)"
started_load="$(cut -d' ' -f1-3 /proc/loadavg)"

# Seeding happens once, at 0 ms, straight to the servers.
RTT=0
BASE="$EMU_BASE"
for group in "${GROUPS_[@]}"; do
    if declare -F "${group}_seed" >/dev/null; then
        say "seeding for '$group'"
        "${group}_seed"
    fi
done

for RTT in "${RTTS[@]}"; do
    endpoint "$EMU_PORT"
    BASE="$ENDPOINT"
    say "round at $RTT ms ($BASE; load average $(cut -d' ' -f1-3 /proc/loadavg))"
    for group in "${GROUPS_[@]}"; do
        if declare -F "${group}_rtts" >/dev/null && ! "${group}_rtts" | grep -qw "$RTT"; then
            continue
        fi
        say "$group at $RTT ms: curl"
        "${group}_curl"
        for col in "${COLUMNS_[@]}"; do
            "${group}_fs" "$col"
        done
    done
    for col in "${COLUMNS_[@]}"; do
        if [[ -n "${PEAK_KB[$col,$RTT]:-}" ]]; then
            CELL[mem,$col,$RTT]="$(awk -v k="${PEAK_KB[$col,$RTT]}" 'BEGIN { printf "%.0f", k / 1024 }')"
        fi
    done
done
bench_row mem "peak RSS of the mount process over the groups above (MiB)"

{
    print_table "${RTTS[@]}"
    echo
    for group in "${GROUPS_[@]}"; do
        if declare -F "${group}_notes" >/dev/null; then "${group}_notes"; fi
    done
    echo
    echo "Machine: nproc $(nproc), $(uname -sr), $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo);" \
        "load average at the start $started_load, at the end $(cut -d' ' -f1-3 /proc/loadavg)." \
        "$(bench_server_version) (in memory, on 127.0.0.1);" \
        "${rclone_version:-rclone missing}; bucketfs $commit, $BIN_KIND, default options, fresh --cache-dir per mount;" \
        "curl $(curl --version | awk 'NR == 1 { print $2 }'); $(date -u +%Y-%m-%dT%H:%MZ)."
} >"$RESULTS"
echo
cat "$RESULTS"
echo
echo "(written to ${RESULTS#"$REPO"/}; details in ${LOG#"$REPO"/})"

for key in "${!CELL[@]}"; do
    if [[ "${CELL[$key]}" == error ]]; then
        echo "bench: some workloads failed (\"error\" cells); see ${LOG#"$REPO"/}" >&2
        exit 1
    fi
done
