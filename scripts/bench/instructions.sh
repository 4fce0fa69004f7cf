#!/usr/bin/env bash
# The read path's CPU cost as instructions, the regression figure of
# docs/performance.md: bash scripts/bench/instructions.sh
#
# Runs the release bucketfs in the foreground under valgrind's callgrind
# (which counts the instructions the mount process executes, so the figure
# barely moves on a busy machine, unlike a time), against fake-gcs-server on
# loopback, and reads a 256 MiB object with `dd bs=1M`:
#   cold     a fresh mount on an empty cache dir;
#   re-read  a new mount on the cache dir the cold read left (block cache).
# Each is paired with a run that mounts the same way and opens the file
# without reading it (dd count=0): its instructions (start-up, mount, lookup,
# open, unmount) are subtracted, and what is left, divided by 256, is the
# figure: instructions per MiB read. The dd's bytes are checked through
# md5sum of its output (no second read through the mount).
#
# Output: the figures on stdout and in .build/bench/instructions.log, with the
# 15 functions of most inclusive and of most exclusive instructions of the
# cold read and of the re-read (callgrind_annotate, demangled); the
# callgrind files stay in
# .build/bench/callgrind/. Needs valgrind (installed here from Debian if
# missing). A run takes about two minutes: the mount runs ~20-50x slower
# under callgrind than natively. Only the mount's own instructions count:
# the kernel's share of a FUSE read (copying the bytes in and out) is not
# in the figure.
#
# Environment: BENCH_BIN=PATH measures that binary instead of building one;
# BENCH_SCRATCH=DIR builds with --scratch-path DIR; INSTRUCTIONS_TIMEOUT=S
# limits each mount, read and unmount (default 900 s).
#
# On exit (also on failure or Ctrl-C) the mount is unmounted, the processes
# started here stopped by their PID, the server stopped.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPO="$(pwd)"
OUT_DIR="$REPO/.build/bench"
CG_DIR="$OUT_DIR/callgrind"
LOG="$OUT_DIR/instructions.log"
PY="$REPO/.build/venv/bin/python"
HELPER="$REPO/scripts/bench/bench_helper.py"
BUCKET=bucketfs-test
SERVER_NAME=instructions
OBJECT=big/random-256MiB.bin
MIB=256
SEED=20260719 # the bench's object (rows/10-read.sh)
LIMIT="${INSTRUCTIONS_TIMEOUT:-900}"
WORK=""
MP=""
MOUNT_PID=""
SERVER_STARTED=0

# shellcheck source=scripts/lib/processes.sh
source "$REPO/scripts/lib/processes.sh"
# shellcheck source=scripts/lib/release.sh
source "$REPO/scripts/lib/release.sh"

say() { printf '==> %s\n' "$*" | tee -a "$LOG" >&2; }

is_mounted() { awk -v mp="$1" '$5 == mp { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n "$MP" ]] && is_mounted "$MP"; then fusermount3 -uz "$MP" >/dev/null 2>&1 || true; fi
    if [[ -n "$MOUNT_PID" ]] && kill -0 "$MOUNT_PID" 2>/dev/null; then stop_pid "$MOUNT_PID"; fi
    if ((SERVER_STARTED)); then bash "$REPO/scripts/fake_gcs_server.sh" stop --name "$SERVER_NAME" || true; fi
    if [[ -n "$WORK" && -d "$WORK" ]]; then rm -rf "$WORK" 2>/dev/null || { sleep 1; rm -rf "$WORK" 2>/dev/null || true; }; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT_DIR"
rm -rf "$CG_DIR"
mkdir -p "$CG_DIR"
: >"$LOG"

say "setup"
bash scripts/setup.sh
if ! dpkg -s valgrind >/dev/null 2>&1; then
    # the way scripts/setup.sh installs its packages; only this script needs it
    SUDO=()
    [[ "$(id -u)" == 0 ]] || SUDO=(sudo)
    say "installing valgrind (Debian)"
    "${SUDO[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y valgrind
fi
release_binary

WORK="$(mktemp -d /tmp/bucketfs-instructions.XXXXXX)"
# What valgrind 3.19 can run: the binary without its DWARF 5 debug info
# (which it cannot read: "unhandled dwarf2 abbrev form code 0x25"; the
# symbol table stays, so functions keep their names), and
# scripts/bench/sigsuspend_copy.c preloaded (see there).
objcopy --strip-debug "$BIN" "$WORK/bucketfs"
cc -O2 -shared -fPIC -o "$WORK/sigsuspend_copy.so" "$REPO/scripts/bench/sigsuspend_copy.c" -ldl
SERVER_STARTED=1
bash scripts/fake_gcs_server.sh start --name "$SERVER_NAME" --bucket "$BUCKET"
BASE="http://127.0.0.1:$(cat "$REPO/.build/servers/$SERVER_NAME/port")"
say "the $MIB MiB object"
"$PY" "$HELPER" gen-big "$WORK/big.bin" "$MIB" "$SEED"
code="$(curl -sS -X POST -T "$WORK/big.bin" -H 'Content-Type: application/octet-stream' -o /dev/null \
    -w '%{http_code}' "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=${OBJECT//\//%2F}")"
[[ "$code" == 200 ]] || { echo "instructions: upload answered $code" >&2; exit 1; }
WANT_MD5="$(md5sum <"$WORK/big.bin" | cut -d' ' -f1)"
MP="$WORK/mnt"
mkdir -p "$MP"

# callgrind_run NAME CACHE_DIR COUNT: mounts under callgrind on CACHE_DIR,
# runs `dd bs=1M count=COUNT` of the object (all of it if COUNT is "all",
# its bytes checked), unmounts, and sets IR to the mount process's total
# instructions (callgrind's Ir). Call it in this shell (never in $(...)):
# the cleanup must see MOUNT_PID.
IR=""
BLOCKS=""
callgrind_run() {
    local name="$1" cache="$2" count="$3" out="$CG_DIR/$1.out" i ir sum args=()
    [[ "$count" == all ]] || args=(count="$count")
    mkdir -p "$cache"
    say "$name: mount under callgrind (cache dir ${cache#"$WORK"/})"
    # --foreground: valgrind follows the process that serves the mount
    # (no daemonising fork); the timeouts are generous because everything
    # runs ~50x slower under callgrind (the kernel's FUSE requests have no
    # timeout here: /proc/sys/fs/fuse/default_request_timeout is 0)
    LD_PRELOAD="$WORK/sigsuspend_copy.so" valgrind --tool=callgrind --trace-children=no --callgrind-out-file="$out" \
        "$WORK/bucketfs" mount --foreground --endpoint "$BASE" --anonymous "gs://$BUCKET" "$MP" \
        --cache-dir "$cache" --connect-timeout 120 --stall-timeout 600 \
        --log-file "$CG_DIR/$name.mount.log" >"$CG_DIR/$name.valgrind.log" 2>&1 </dev/null &
    MOUNT_PID=$!
    for ((i = 0; i < LIMIT * 10; i++)); do
        is_mounted "$MP" && break
        kill -0 "$MOUNT_PID" 2>/dev/null || { cat "$CG_DIR/$name.valgrind.log" >&2; echo "instructions: the mount exited" >&2; return 1; }
        sleep 0.1
    done
    is_mounted "$MP" || { echo "instructions: not mounted after $LIMIT s" >&2; return 1; }
    # the blocks the cache holds, as the mount's status counts them (it
    # reads the cache's index at start); asked in every run, so the
    # subtraction takes its instructions out again
    # (its control socket may come a moment after the mount under callgrind)
    BLOCKS=""
    for ((i = 0; i < LIMIT * 2; i++)); do
        BLOCKS="$("$BIN" status "$MP" --json 2>/dev/null | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[0]["filesystem"]["caches"]["blockCacheBlocks"])' 2>/dev/null)" && break
        sleep 0.5
    done
    [[ "$BLOCKS" =~ ^[0-9]+$ ]] || { echo "instructions: no status from the mount" >&2; return 1; }
    say "$name: dd bs=1M ${args[*]:-(all)}"
    sum="$(timeout -k 5 "$LIMIT" dd if="$MP/$OBJECT" bs=1M "${args[@]}" 2>>"$LOG" | md5sum | cut -d' ' -f1)"
    if [[ "$count" == all && "$sum" != "$WANT_MD5" ]]; then
        echo "instructions: $name read bytes that differ from the object's" >&2
        return 1
    fi
    fusermount3 -u "$MP" || fusermount3 -uz "$MP"
    for ((i = 0; i < LIMIT * 10; i++)); do
        kill -0 "$MOUNT_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$MOUNT_PID" 2>/dev/null; then
        echo "instructions: the mount did not exit within $LIMIT s of its unmount" >&2
        return 1
    fi
    wait "$MOUNT_PID" || { cat "$CG_DIR/$name.valgrind.log" >&2; echo "instructions: the mount exited with an error" >&2; return 1; }
    MOUNT_PID=""
    # "summary: N" (older callgrind) or "totals: N": the Ir of the process
    ir="$(awk '$1 == "summary:" || $1 == "totals:" { print $2; exit }' "$out")"
    [[ "$ir" =~ ^[0-9]+$ ]] || { echo "instructions: no total in $out" >&2; return 1; }
    log_line "$name: $ir instructions"
    IR="$ir"
}

log_line() { printf '%s\n' "$*" >>"$LOG"; }

# top_functions NAME: the 15 functions of most inclusive instructions of a
# run (what they and their callees cost), and the 15 of most instructions
# of their own, into the log
top_functions() {
    local inclusive
    for inclusive in yes no; do
        echo
        echo "--- $1: top 15 functions, --inclusive=$inclusive (callgrind_annotate)"
        # awk reads to the end: callgrind_annotate must not die of SIGPIPE
        callgrind_annotate --inclusive="$inclusive" "$CG_DIR/$1.out" 2>/dev/null |
            awk '/file:function/ { on = 1; next } on && /^-+$/ { next } on && NF && n++ < 15' |
            swift demangle --simplified
    done >>"$LOG"
}

per_mib() { awk -v a="$1" -v b="$2" -v m="$MIB" 'BEGIN { printf "%.0f", (a - b) / m }'; }

callgrind_run setup-cold "$WORK/cache-setup" 0
setup_cold="$IR"
callgrind_run cold "$WORK/cache" all
cold="$IR"
callgrind_run setup-warm "$WORK/cache" 0
cached="$BLOCKS"
log_line "cache after the cold read: $cached blocks"
setup_warm="$IR"
callgrind_run reread "$WORK/cache" all
reread="$IR"
top_functions cold
top_functions reread

{
    echo "Instructions of the mount process per MiB read ($MIB MiB, dd bs=1M, fake-gcs-server on loopback;"
    echo "callgrind Ir, minus a run that mounts and opens the file without reading):"
    echo "  cold read (fresh mount, empty cache dir):      $(per_mib "$cold" "$setup_cold") per MiB ($cold - $setup_cold)"
    echo "  re-read (new mount, same cache dir):           $(per_mib "$reread" "$setup_warm") per MiB ($reread - $setup_warm)"
    echo "  blocks in the cache after the cold read:       $cached of $MIB"
    echo "bucketfs $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $BIN_KIND ($BIN); $(valgrind --version)."
} | tee -a "$LOG"
echo "(details and the top functions in ${LOG#"$REPO"/})"
