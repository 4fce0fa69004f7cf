#!/usr/bin/env bash
# The benchmark (README): bash scripts/bench.sh
#
# Compares, in one run on one emulator on loopback:
#   curl     the same transfers straight against the JSON API (the server's
#            limit; one curl process per workload, connections kept alive);
#   bucketfs the release build, mounted fresh (empty cache dir) for each
#            workload group, so "cold" is cold;
#   rclone   `rclone mount` from Debian, a `google cloud storage` remote with
#            anonymous = true and endpoint http://127.0.0.1:PORT/storage/v1/,
#            fresh mount and cache dir per group like bucketfs; default VFS
#            settings (--vfs-cache-mode off) for the read groups, and
#            --vfs-cache-mode writes for the write group (without a VFS cache
#            rclone refuses writes that are not purely sequential, e.g.
#            opening an existing file for writing without O_TRUNC);
#            BENCH_RCLONE_WRITE_FLAGS="..." replaces those flags.
#
# Steps: scripts/setup.sh; `swift build -c release --product bucketfs`
# (BENCH_SCRATCH=DIR adds --scratch-path DIR; BENCH_BIN=PATH skips the build
# and measures that binary instead; BENCH_TIMEOUT=S limits each measured
# command, default 120 s); starts its own emulator
# (scripts/emulator.sh --name bench); seeds it with curl through the JSON API:
#   big/random-256MiB.bin     256 MiB, deterministic pseudo-random bytes
#   dir2000/file-NNNN.txt     2,000 small objects in one directory
#   tree/dA/eB/fC.txt         1,000 small objects in 110 nested directories
#   stat/one.txt              one small object for the stat() loop
# and, just before each column's write workloads,
#   rmtree-COLUMN/dNN/fNNN.txt  1,000 small objects in 10 directories (rm -rf)
# then measures every workload and prints one table (also written to
# .build/bench/results.md; the details of the run go to .build/bench/bench.log).
# BENCH_RAND_DEADLINE=S (default 45) stops a random-read loop still running
# after S seconds and reports the rate so far. A workload that fails or times
# out shows "error" in its cell; the rest of the table is still measured, and
# the script exits 1 after printing it. On exit (also on failure or Ctrl-C)
# every mount made here is lazily unmounted (fusermount3 -uz), every process
# started here is stopped by its PID, and the emulator is stopped.
#
# The write workloads (a 256 MiB cp, 300 small files, rm -rf of 1,000 files)
# live in scripts/bench/write_workloads.sh, which says how "durable" is
# measured.
#
# Adding a workload: add a
# row key to ROWS with its label in LABEL, write `curl_<name>` and/or
# `fs_<name> MOUNTPOINT` functions that print the cell's number on stdout
# (and fail on any error), and call them with `measure ROW COLUMN FUNC ARGS`
# from main (curl) and from a mount group (run_group) for the file systems.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"

BUCKET=bucketfs-test
EMU_NAME=bench
EMU_REQUESTS="$REPO/.build/servers/$EMU_NAME/requests.log"
OUT_DIR="$REPO/.build/bench"
LOG="$OUT_DIR/bench.log"
RESULTS="$OUT_DIR/results.md"
HELPER="$REPO/scripts/bench/bench_helper.py"
# shellcheck source=scripts/bench/write_workloads.sh
source "$REPO/scripts/bench/write_workloads.sh"
PY="$REPO/.build/venv/bin/python"

BIG_MIB=256
BIG_NAME="big/random-256MiB.bin"
BIG_SEED=20260719
RAND_COUNT=2000
RAND_BLOCK=4096
RAND_SEED=4096
STAT_COUNT=10000
DIR_COUNT=2000
TREE_FILES=1000
TREE_FIND_LINES=1111 # tree itself + 10 + 100 directories + 1,000 files
# Seconds any one measured command may take before it counts as an error.
WORKLOAD_TIMEOUT="${BENCH_TIMEOUT:-120}"
# Seconds the random-read loop may run before it stops and reports what it
# did (rclone without a VFS cache reads ahead on every seek and is slow here).
RAND_DEADLINE="${BENCH_RAND_DEADLINE:-45}"

SWIFT_SCRATCH=()
if [[ -n "${BENCH_SCRATCH:-}" ]]; then
    SWIFT_SCRATCH=(--scratch-path "$BENCH_SCRATCH")
fi
# shellcheck disable=SC2206 # word splitting of the flags is the point
RCLONE_WRITE_FLAGS=(${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes})

COLUMNS_=(curl bucketfs rclone)
ROWS=(seq ls_cold ls_warm find rand_cold rand_warm stat wbig wsmall rmtree mem)
declare -A LABEL=(
    [seq]="read a 256 MiB object, cold (MiB/s)"
    [ls_cold]="ls -l of 2,000 objects, cold (s)"
    [ls_warm]="ls -l of 2,000 objects, warm (s)"
    [find]="find over 1,000 files in 110 dirs, cold (s)"
    [rand_cold]="2,000 random 4 KiB reads, cold (IOPS)"
    [rand_warm]="2,000 random 4 KiB reads, cached (IOPS)"
    [stat]="10,000 stat() of one file (stat/s)"
    [wbig]="write a 256 MiB file, until durable (MiB/s)"
    [wsmall]="300 files of 4 KiB into a new dir, until durable (files/s)"
    [rmtree]="rm -rf of 1,000 files in 10 dirs (s)"
    [mem]="peak RSS of the mount process (MiB)"
)
declare -A CELL=()

# State for cleanup.
WORK=""
EMU_STARTED=0
MOUNTS=()      # every mountpoint mounted here
PIDS=()        # every long-running process started here (mount daemons)
CUR_MP=""      # the current mount
CUR_COL=""     # its column (bucketfs or rclone), for the names it writes
CUR_PID=""     # its process
MEASURE_PID="" # the workload running now
declare -A PEAK_KB=()

say() { printf '==> %s\n' "$*" | tee -a "$LOG" >&2; }
log() { printf '%s\n' "$*" >>"$LOG"; }
now() { date +%s.%N; }
# seconds between two `now` values
diff_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# MiB/s for BYTES over SECONDS
rate_mib() { awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) exit 1; printf "%.0f", n / 1048576 / s }'; }
# runs a command with the workload time limit (SIGKILL 5 s after SIGTERM)
limited() { timeout -k 5 "$WORKLOAD_TIMEOUT" "$@"; }

is_mounted() {
    # mountinfo field 5 is the mountpoint (spaces escaped as \040; ours have none)
    awk -v mp="$1" '$5 == mp { found = 1 } END { exit !found }' /proc/self/mountinfo
}

alive() { # PID: running (a zombie child of ours counts as gone)
    kill -0 "$1" 2>/dev/null || return 1
    local state
    state="$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null || true)"
    [[ -n "$state" && "$state" != Z ]]
}

wait_gone() { # PID SECONDS: waits until PID has exited (and reaps it if ours)
    local pid="$1" i deadline
    deadline=$(awk -v s="$2" 'BEGIN { print int(s * 20) }')
    for ((i = 0; i < deadline; i++)); do
        if ! alive "$pid"; then
            wait "$pid" 2>/dev/null || true
            return 0
        fi
        sleep 0.05
    done
    return 1
}

stop_pid() { # PID: TERM, then KILL if it does not go
    local pid="$1"
    [[ -n "$pid" ]] || return 0
    alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
    kill "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 && return 0
    kill -9 "$pid" 2>/dev/null || true
    wait_gone "$pid" 2 || true
}

kill_tree() { # PID: the process and all its descendants (all started here)
    local pid="$1" f stat ppid children=()
    kill -STOP "$pid" 2>/dev/null || true # no new children meanwhile
    for f in /proc/[0-9]*/stat; do
        stat="$(cat "$f" 2>/dev/null)" || continue
        stat="${stat##*) }"             # after "pid (comm) ": state ppid ...
        read -r _ ppid _ <<<"$stat"
        if [[ "$ppid" == "$pid" ]]; then
            f="${f#/proc/}"
            children+=("${f%/stat}")
        fi
    done
    for f in "${children[@]}"; do
        kill_tree "$f"
    done
    kill -9 "$pid" 2>/dev/null || true
}

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
    local rc=$? mp pid
    trap - EXIT INT TERM
    if [[ -n "$MEASURE_PID" ]] && alive "$MEASURE_PID"; then
        kill_tree "$MEASURE_PID"
    fi
    for mp in "${MOUNTS[@]}"; do
        if is_mounted "$mp"; then
            fusermount3 -uz "$mp" >/dev/null 2>&1 || true
        fi
    done
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid"
    done
    if ((EMU_STARTED)); then
        bash "$REPO/scripts/emulator.sh" stop --name "$EMU_NAME" || true
    fi
    if [[ -n "$WORK" && -d "$WORK" ]]; then
        # lazily unmounted directories may still be busy for a moment
        rm -rf "$WORK" 2>/dev/null || { sleep 1; rm -rf "$WORK" 2>/dev/null || true; }
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the emulator's request log (one line per request, see scripts/emulator.sh)
request_count() { wc -l <"$EMU_REQUESTS" 2>/dev/null || echo 0; }
request_summary() { # LINES_BEFORE: the requests since then, by kind
    tail -n +"$(($1 + 1))" "$EMU_REQUESTS" 2>/dev/null | awk -F'\t' '
        { kind = $1 " " ($2 ~ /^\/upload\// ? "upload" : ($2 ~ /^\/download\// || $3 ~ /alt=media/ ? "media" : ($2 ~ /\/o$/ ? "list" : "metadata"))); n[kind]++; total++ }
        END { printf "%d", total; for (k in n) printf ", %s %d", k, n[k] }'
}

# measure ROW COLUMN FUNC ARGS...: runs FUNC (in a background subshell, so
# that `set -e` applies inside it) and stores what it printed in the cell, or
# "error" if it failed or printed nothing.
measure() {
    local row="$1" col="$2" out rc=0 value
    shift 2
    out="$WORK/measure.out"
    log "--- $row / $col: $*"
    local before
    before="$(request_count)"
    "$@" >"$out" 2>>"$LOG" &
    MEASURE_PID=$!
    wait "$MEASURE_PID" || rc=$?
    MEASURE_PID=""
    log "    requests to the emulator: $(request_summary "$before")"
    value="$(tail -n 1 "$out" 2>/dev/null || true)"
    if ((rc != 0)) || [[ -z "$value" ]]; then
        log "    FAILED (exit $rc)"
        printf '    %-8s %-45s error (exit %s, see %s)\n' "$col" "${LABEL[$row]}" "$rc" "$LOG" >&2
        CELL[$row,$col]=error
        return 0
    fi
    log "    = $value"
    printf '    %-8s %-45s %s\n' "$col" "${LABEL[$row]}" "$value" >&2
    CELL[$row,$col]="$value"
}

# ---------------------------------------------------------------- seeding

seed() {
    local base="$1" code
    say "generating the ${BIG_MIB} MiB object (seed $BIG_SEED)"
    "$PY" "$HELPER" gen-big "$WORK/big.bin" "$BIG_MIB" "$BIG_SEED"
    "$PY" "$HELPER" offsets $((BIG_MIB << 20)) "$RAND_COUNT" "$RAND_BLOCK" "$RAND_SEED" >"$WORK/offsets"
    "$PY" "$HELPER" gen-text "$WORK/small.txt" "$SMALL_SIZE"

    say "seeding gs://$BUCKET through the JSON API with curl"
    code="$(curl -sS -X POST -T "$WORK/big.bin" -H 'Content-Type: application/octet-stream' \
        -o /dev/null -w '%{http_code}' \
        "$base/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=${BIG_NAME//\//%2F}")"
    [[ "$code" == 200 ]] || { echo "bench: upload of $BIG_NAME answered $code" >&2; return 1; }
    "$PY" "$HELPER" upload-config "$base" "$BUCKET" dir2000 tree stat >"$WORK/upload.cfg"
    curl -K "$WORK/upload.cfg" >"$WORK/upload.codes"
    local ok
    ok="$(grep -c '^200$' "$WORK/upload.codes" || true)"
    if [[ "$ok" != $((DIR_COUNT + TREE_FILES + 1)) ]]; then
        echo "bench: only $ok of $((DIR_COUNT + TREE_FILES + 1)) small uploads succeeded" >&2
        return 1
    fi
}

# ---------------------------------------------------------------- curl column

curl_seq() {
    local t0 t1 size
    t0=$(now)
    size="$(limited curl -sS --fail -o /dev/null -w '%{size_download}' \
        "$BASE/storage/v1/b/$BUCKET/o/${BIG_NAME//\//%2F}?alt=media")"
    t1=$(now)
    [[ "$size" == $((BIG_MIB << 20)) ]] || { echo "curl_seq: got $size bytes" >&2; return 1; }
    rate_mib "$size" "$(diff_s "$t0" "$t1")"
}

# curl_list PREFIX DELIMITER(yes|no) TAG EXPECTED_ITEMS: every page of a
# listing, as a client would fetch it; prints seconds
curl_list() {
    local prefix="$1" delim="$2" tag="$3" expected="$4" token="" page=0 url t0 t1 items
    rm -f "$WORK/$tag".*.json
    t0=$(now)
    while :; do
        url="$BASE/storage/v1/b/$BUCKET/o?prefix=${prefix//\//%2F}"
        [[ "$delim" == yes ]] && url+="&delimiter=%2F"
        [[ -n "$token" ]] && url+="&pageToken=$token"
        page=$((page + 1))
        limited curl -sS --fail -o "$WORK/$tag.$page.json" "$url"
        token="$(grep -o '"nextPageToken": *"[^"]*"' "$WORK/$tag.$page.json" |
            sed -e 's/.*: *"//' -e 's/"$//' -e 's/+/%2B/g' -e 's/\//%2F/g' -e 's/=/%3D/g' || true)"
        [[ -n "$token" ]] || break
    done
    t1=$(now)
    items="$("$PY" "$HELPER" count-items "$WORK/$tag".*.json)"
    [[ "$items" == "$expected" ]] || { echo "curl_list $prefix: $items items, want $expected" >&2; return 1; }
    echo "curl_list $prefix: $page page(s), $items items" >&2
    diff_s "$t0" "$t1"
}

# 2,000 ranged GETs from one curl process (curl --config with one
# url/range/output block per read, separated by `next`; one kept-alive
# connection); prints IOPS
curl_rand() {
    local t0 t1 ok
    "$PY" "$HELPER" range-config "$BASE/storage/v1/b/$BUCKET/o/${BIG_NAME//\//%2F}?alt=media" \
        "$WORK/offsets" "$RAND_BLOCK" >"$WORK/range.cfg"
    t0=$(now)
    limited curl -K "$WORK/range.cfg" >"$WORK/range.codes"
    t1=$(now)
    ok="$(grep -c "^206 $RAND_BLOCK\$" "$WORK/range.codes" || true)"
    [[ "$ok" == "$RAND_COUNT" ]] || { echo "curl_rand: $ok of $RAND_COUNT ranged GETs were 206 $RAND_BLOCK" >&2; return 1; }
    awk -v n="$RAND_COUNT" -v s="$(diff_s "$t0" "$t1")" 'BEGIN { printf "%.0f", n / s }'
}

# ---------------------------------------------------------------- file-system column

fs_seq() { # MP: dd of the big file; prints MiB/s
    local mp="$1" t0 t1 bytes
    t0=$(now)
    limited dd if="$mp/$BIG_NAME" of=/dev/null bs=1M 2>"$WORK/dd.err"
    t1=$(now)
    cat "$WORK/dd.err" >&2
    bytes="$(awk '/bytes/ { print $1; exit }' "$WORK/dd.err")"
    [[ "$bytes" == $((BIG_MIB << 20)) ]] || { echo "fs_seq: dd copied $bytes bytes" >&2; return 1; }
    rate_mib "$bytes" "$(diff_s "$t0" "$t1")"
}

fs_ls() { # MP: ls -l of dir2000; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    limited ls -l "$mp/dir2000" >"$WORK/ls.out"
    t1=$(now)
    lines="$(grep -c '^-' "$WORK/ls.out" || true)"
    [[ "$lines" == "$DIR_COUNT" ]] || { echo "fs_ls: $lines files listed, want $DIR_COUNT" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_find() { # MP: find over the tree; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    limited find "$mp/tree" >"$WORK/find.out"
    t1=$(now)
    lines="$(wc -l <"$WORK/find.out")"
    [[ "$lines" == "$TREE_FIND_LINES" ]] || { echo "fs_find: $lines entries, want $TREE_FIND_LINES" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_rand() { # MP: pread()s at the seeded offsets, bytes checked; prints IOPS
    # (after RAND_DEADLINE seconds it stops and reports the IOPS so far,
    # marked with how many reads were done)
    limited "$PY" "$HELPER" randread "$1/$BIG_NAME" "$WORK/offsets" "$RAND_BLOCK" \
        --verify "$WORK/big.bin" --deadline "$RAND_DEADLINE"
}

fs_stat() { # MP: prints stat() per second
    limited "$PY" "$HELPER" statloop "$1/stat/one.txt" "$STAT_COUNT"
}

# ---------------------------------------------------------------- mounting

find_mount_pid() { # MP: the PID of the bucketfs process serving MP
    local mp="$1" f pid
    for f in /proc/[0-9]*/cmdline; do
        pid="${f#/proc/}"
        pid="${pid%/cmdline}"
        [[ "$pid" != "$$" ]] || continue
        if tr '\0' '\n' 2>/dev/null <"$f" | grep -qxF -- "$mp"; then
            if [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == "$BIN" ]]; then
                echo "$pid"
                return 0
            fi
        fi
    done
    return 1
}

mount_bucketfs() { # GROUP: sets CUR_MP/CUR_PID
    local group="$1"
    CUR_MP="$WORK/mnt-bucketfs-$group"
    local cache="$WORK/cache-bucketfs-$group"
    mkdir -p "$CUR_MP" "$cache"
    MOUNTS+=("$CUR_MP")
    log "mount: $BIN mount --endpoint $BASE --anonymous gs://$BUCKET $CUR_MP --cache-dir $cache"
    if ! limited "$BIN" mount --endpoint "$BASE" --anonymous "gs://$BUCKET" "$CUR_MP" \
        --cache-dir "$cache" --log-file "$OUT_DIR/bucketfs-$group.log" >>"$LOG" 2>&1; then
        log "mount: bucketfs mount failed"
        CUR_PID="$(find_mount_pid "$CUR_MP" || true)"
        [[ -z "$CUR_PID" ]] || PIDS+=("$CUR_PID")
        return 1
    fi
    CUR_PID="$(find_mount_pid "$CUR_MP" || true)"
    [[ -z "$CUR_PID" ]] || PIDS+=("$CUR_PID")
    is_mounted "$CUR_MP" || { log "mount: $CUR_MP not in mountinfo"; return 1; }
    [[ -n "$CUR_PID" ]] || log "mount: no bucketfs process found for $CUR_MP"
}

mount_rclone() { # GROUP: sets CUR_MP/CUR_PID
    local group="$1" flags=()
    CUR_MP="$WORK/mnt-rclone-$group"
    local cache="$WORK/cache-rclone-$group"
    mkdir -p "$CUR_MP" "$cache"
    MOUNTS+=("$CUR_MP")
    [[ "$group" != write ]] || flags=("${RCLONE_WRITE_FLAGS[@]}")
    log "mount: rclone --config $RCLONE_CONF mount bench:$BUCKET $CUR_MP --cache-dir $cache ${flags[*]}"
    rclone --config "$RCLONE_CONF" mount "bench:$BUCKET" "$CUR_MP" --cache-dir "$cache" "${flags[@]}" \
        --log-file "$OUT_DIR/rclone-$group.log" </dev/null >>"$LOG" 2>&1 &
    CUR_PID=$!
    PIDS+=("$CUR_PID")
    for _ in $(seq 1 200); do
        is_mounted "$CUR_MP" && return 0
        alive "$CUR_PID" || { log "mount: rclone exited"; return 1; }
        sleep 0.05
    done
    log "mount: rclone not mounted within 10 s"
    return 1
}

note_peak() { # COLUMN GROUP: VmHWM of the current mount process
    local col="$1" group="$2" kb
    [[ -n "$CUR_PID" ]] || return 0
    kb="$(awk '/^VmHWM:/ { print $2 }' "/proc/$CUR_PID/status" 2>/dev/null || true)"
    [[ -n "$kb" ]] || return 0
    log "memory: $col $group: VmHWM $kb kB"
    if [[ -z "${PEAK_KB[$col]:-}" ]] || ((kb > PEAK_KB[$col])); then
        PEAK_KB[$col]="$kb"
    fi
}

unmount_current() { # COLUMN
    local col="$1"
    [[ -n "$CUR_MP" ]] || return 0
    if is_mounted "$CUR_MP"; then
        if [[ "$col" == bucketfs ]]; then
            limited "$BIN" unmount "$CUR_MP" >>"$LOG" 2>&1 || {
                log "unmount: bucketfs unmount failed; fusermount3 -uz"
                fusermount3 -uz "$CUR_MP" >>"$LOG" 2>&1 || true
            }
        else
            fusermount3 -u "$CUR_MP" >>"$LOG" 2>&1 || fusermount3 -uz "$CUR_MP" >>"$LOG" 2>&1 || true
        fi
    fi
    if [[ -n "$CUR_PID" ]] && ! wait_gone "$CUR_PID" 10; then
        log "unmount: $col process $CUR_PID still running 10 s after unmount; stopping it"
        stop_pid "$CUR_PID"
    fi
    CUR_MP=""
    CUR_PID=""
    CUR_COL=""
}

# run_group COLUMN GROUP ROW:FUNC...: one fresh mount (empty cache dir), the
# given workloads in order, then its peak memory, then unmount
run_group() {
    local col="$1" group="$2" spec row
    shift 2
    say "$col: mount for '$group'"
    CUR_COL="$col"
    if ! "mount_$col" "$group"; then
        for spec in "$@"; do
            row="${spec%%:*}"
            CELL[$row,$col]=error
            printf '    %-8s %-45s error (mount failed, see %s)\n' "$col" "${LABEL[$row]}" "$LOG" >&2
        done
        unmount_current "$col"
        return 0
    fi
    for spec in "$@"; do
        measure "${spec%%:*}" "$col" "${spec#*:}" "$CUR_MP"
    done
    note_peak "$col" "$group"
    unmount_current "$col"
}

bench_mount() { # COLUMN
    local col="$1"
    run_group "$col" seq seq:fs_seq
    run_group "$col" meta ls_cold:fs_ls ls_warm:fs_ls find:fs_find stat:fs_stat
    run_group "$col" rand rand_cold:fs_rand rand_warm:fs_rand
    # the tree rm -rf deletes is seeded before the mount, so that no cache
    # of the mount can have missed it
    local write_specs=(wbig:fs_wbig wsmall:fs_wsmall rmtree:fs_rmtree)
    say "seeding rmtree-$col/ (1,000 objects) through the JSON API"
    if ! seed_rmtree "rmtree-$col" 2>>"$LOG"; then
        CELL[rmtree,$col]=error
        printf '    %-8s %-45s error (seeding failed, see %s)\n' "$col" "${LABEL[rmtree]}" "$LOG" >&2
        write_specs=(wbig:fs_wbig wsmall:fs_wsmall)
    fi
    run_group "$col" write "${write_specs[@]}"
    if [[ -n "${PEAK_KB[$col]:-}" ]]; then
        CELL[mem,$col]="$(awk -v k="${PEAK_KB[$col]}" 'BEGIN { printf "%.0f", k / 1024 }')"
    else
        CELL[mem,$col]=error
    fi
}

# ---------------------------------------------------------------- table

print_table() {
    local row col
    {
        echo "| workload | curl (limit) | bucketfs | rclone mount |"
        echo "|---|---:|---:|---:|"
        for row in "${ROWS[@]}"; do
            printf '| %s |' "${LABEL[$row]}"
            for col in "${COLUMNS_[@]}"; do
                printf ' %s |' "${CELL[$row,$col]:-—}"
            done
            printf '\n'
        done
        echo
        echo "Notes: \"—\": not applicable (curl has no cache, no stat(), no mount process). curl: the"
        echo "listings fetch every page (prefix + delimiter for ls, no delimiter for find); random reads are"
        echo "2,000 ranged GETs from one curl process (curl --config, url/range/output blocks separated by"
        echo "\`next\`, one kept-alive connection). Mounts: fresh mount and empty cache dir per group"
        echo "(sequential read | ls cold, ls warm, find, stat | random reads cold, then again); random reads"
        echo "are os.pread() of 4 KiB at seeded, 4 KiB-aligned offsets on one open file, bytes checked"
        echo "against the source; a loop still running after ${RAND_DEADLINE} s stops and reports the rate so far."
        echo "rclone runs with --vfs-cache-mode off (its default) for reads, so its \"cached\" reads are not cached."
        echo "Writes (a fourth mount per file system; rclone with ${RCLONE_WRITE_FLAGS[*]}): \"until durable\""
        echo "runs from the start of the command until the JSON API shows every object with its full size"
        echo "(polled every 50-100 ms while not; bucketfs uploads before close returns, rclone after, by its"
        echo "--vfs-write-back delay, default 5 s), MD5 checked afterwards; 256 MiB: cp into the mount, curl one"
        echo "uploadType=media POST with -T; 300 files: one bash process writing each file with the builtin"
        echo "printf (no fork per file) into a directory made just before, curl 300 media uploads from one"
        echo "process (--config, \`next\`); rm -rf: 1,000 objects seeded through the API before the mount,"
        echo "time until rm returns, nothing may be left under the prefix then; curl 1,000 DELETEs from one process."
        echo "Peak RSS: the largest VmHWM of the mount process over the four mounts."
        echo
        echo "$FACTS"
    } >"$RESULTS"
    echo
    cat "$RESULTS"
    echo
    echo "(written to ${RESULTS#"$REPO"/}; details in ${LOG#"$REPO"/})"
}

# ---------------------------------------------------------------- main

mkdir -p "$OUT_DIR"
: >"$LOG"
rm -f "$OUT_DIR"/bucketfs-*.log "$OUT_DIR"/rclone-*.log "$RESULTS"
WORK="$(mktemp -d /tmp/bucketfs-bench.XXXXXX)"

say "setup"
bash scripts/setup.sh
if [[ -n "${BENCH_BIN:-}" ]]; then
    say "using BENCH_BIN=$BENCH_BIN (no build)"
    BIN="$BENCH_BIN"
    BIN_KIND="binary $BENCH_BIN"
else
    say "building bucketfs (release)"
    swift build -c release --product bucketfs "${SWIFT_SCRATCH[@]}"
    BIN="$(swift build -c release --show-bin-path "${SWIFT_SCRATCH[@]}")/bucketfs"
    BIN_KIND="release build"
fi
BIN="$(readlink -f "$BIN")"
[[ -x "$BIN" ]] || { echo "bench: no bucketfs binary at $BIN" >&2; exit 1; }

say "starting the emulator"
EMU_STARTED=1
bash scripts/emulator.sh start --name "$EMU_NAME"
BASE="$(bash scripts/emulator.sh env --name "$EMU_NAME")"
BASE="${BASE#STORAGE_EMULATOR_HOST=}"
[[ "$BASE" =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || { echo "bench: unexpected emulator address $BASE" >&2; exit 1; }
PORT="${BASE##*:}"

RCLONE_CONF="$WORK/rclone.conf"
cat >"$RCLONE_CONF" <<EOF
[bench]
type = google cloud storage
anonymous = true
endpoint = http://127.0.0.1:$PORT/storage/v1/
EOF

commit="$(git rev-parse --short HEAD 2>/dev/null || echo 'no commit yet')"
if [[ -n "$(git status --porcelain 2>/dev/null | sed -n 1p)" ]]; then
    commit+=" (+ uncommitted changes)"
fi
emu_version="$("$PY" -c 'import importlib.metadata as m; print(m.version("gcp-storage-emulator"))' 2>/dev/null || echo unknown)"
rclone_version="$(rclone version 2>/dev/null | sed -n 1p)"
FACTS="Machine: nproc $(nproc), $(uname -sr), $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); gcp-storage-emulator $emu_version (scripts/emulator_wrapper.py, in memory, on 127.0.0.1); ${rclone_version} (google cloud storage remote, anonymous, endpoint .../storage/v1/, default VFS (--vfs-cache-mode off) for reads, ${RCLONE_WRITE_FLAGS[*]} for writes); bucketfs ${commit}, ${BIN_KIND}, default options, fresh --cache-dir per mount; curl $(curl --version | awk 'NR == 1 { print $2 }'), one process per workload, connection kept alive; $(date -u +%Y-%m-%dT%H:%MZ)."

seed "$BASE"

say "curl (the server's limit)"
measure seq curl curl_seq
measure ls_cold curl curl_list dir2000/ yes dir "$DIR_COUNT"
measure find curl curl_list tree/ no tree "$TREE_FILES"
measure rand_cold curl curl_rand
measure wbig curl curl_wbig
measure wsmall curl curl_wsmall
measure rmtree curl curl_rmtree

say "bucketfs ($BIN)"
bench_mount bucketfs

say "rclone mount"
bench_mount rclone

print_table

# The table is always printed; the exit status says whether every cell was
# measured.
for key in "${!CELL[@]}"; do
    if [[ "${CELL[$key]}" == error ]]; then
        echo "bench: some workloads failed (\"error\" cells); see ${LOG#"$REPO"/}" >&2
        exit 1
    fi
done
