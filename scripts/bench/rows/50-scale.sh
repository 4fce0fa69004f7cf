# shellcheck shell=bash
# Scale: one directory of 100,000 objects, and a bucket of 1,000,000 objects
# (1,000 directories of 1,000) walked with find.
#
# Server: Tests/Servers/fake_gcs.py, not the emulator. The emulator builds
# every listing page from a scan and sort of the whole bucket (O(n) per
# page, so O(n^2 / 1000) for a paged listing: minutes for 100,000 objects)
# and takes a request per object to seed (about 10 minutes for a million);
# fake_gcs.py pages from a sorted index and seeds in bulk (POST /_seed), and
# pages exactly like GCS (1,000 entries, opaque tokens).

SCALE_DIR=big100k
SCALE_DIR_COUNT=100000
WALK_PREFIX=m
WALK_DIRS=1000
WALK_FILES=1000
WALK_FIND_LINES=$((1 + WALK_DIRS + WALK_DIRS * WALK_FILES))
ABSENT_STATS=1000
# The 100,000-object rows are medians of this many rounds, each cold one on
# a fresh mount (the listing's rows move by a fifth between single runs).
SCALE_ROUNDS="${BENCH_SCALE_ROUNDS:-3}"

bench_group scale
bench_row ls100k_cold "ls -l of one directory of 100,000 objects, cold (s)" s
bench_row ls100k_warm "ls -l of it again, warm (s)" s
bench_row ls100k_local "ls -l of 100,000 files on the local disk, warm (s; ls's own floor, curl column)"
bench_row stat100k "1,000 stat() of absent names in it, after ls (stat/s)"
bench_row rss100k "peak RSS of the mount after that (MiB)"
bench_row walk1m "find over 1,000,000 objects in 1,000 dirs (s)" s
bench_row rss1m "peak RSS of the mount during that find (MiB)"

scale_seed() {
    local out
    # the same directory on the local disk: what `ls -l` itself needs
    mkdir -p "$WORK/local100k"
    "$PY" -c 'import sys; [open(f"{sys.argv[1]}/f{i:05d}", "w").close() for i in range(int(sys.argv[2]))]' \
        "$WORK/local100k" "$SCALE_DIR_COUNT"
    scale_server
    out="$(curl -sS --fail -X POST -d "{\"bucket\": \"$BUCKET\", \"prefix\": \"$SCALE_DIR/\", \"files\": $SCALE_DIR_COUNT}" \
        "http://127.0.0.1:$SCALE_PORT/_seed")"
    log "seed: $out"
    out="$(curl -sS --fail -X POST -d "{\"bucket\": \"$BUCKET\", \"prefix\": \"$WALK_PREFIX/\", \"dirs\": $WALK_DIRS, \"files\": $WALK_FILES}" \
        "http://127.0.0.1:$SCALE_PORT/_seed")"
    log "seed: $out"
}

# sets SCALE_BASE: the scale server as seen at this round's round trip
scale_base() {
    scale_server
    endpoint "$SCALE_PORT"
    SCALE_BASE="$ENDPOINT"
}

fs_ls_local() { # warm ls -l of the local directory (warmed before the first round)
    local t0 t1
    t0=$(now)
    limited ls -l "$WORK/local100k" >/dev/null
    t1=$(now)
    diff_s "$t0" "$t1"
}

scale_curl() {
    local saved="$BASE"
    local round
    if [[ "$RTT" == 0 ]]; then
        ls -l "$WORK/local100k" >/dev/null
        for round in $(seq 1 "$SCALE_ROUNDS"); do
            measure ls100k_local curl fs_ls_local
            keep_round ls100k_local curl
        done
        median_cell ls100k_local curl
    fi
    scale_base
    BASE="$SCALE_BASE"
    for round in $(seq 1 "$SCALE_ROUNDS"); do
        measure ls100k_cold curl curl_list "$SCALE_DIR/" yes big100k "$SCALE_DIR_COUNT"
        keep_round ls100k_cold curl
    done
    median_cell ls100k_cold curl
    measure walk1m curl curl_list "$WALK_PREFIX/" no walk "$((WALK_DIRS * WALK_FILES))"
    BASE="$saved"
}

fs_ls100k() { # MP: ls -l of the big directory; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    limited ls -l "$mp/$SCALE_DIR" >"$WORK/ls100k.out"
    t1=$(now)
    lines="$(grep -c '^-' "$WORK/ls100k.out" || true)"
    rm -f "$WORK/ls100k.out"
    [[ "$lines" == "$SCALE_DIR_COUNT" ]] || { echo "fs_ls100k: $lines files listed, want $SCALE_DIR_COUNT" >&2; return 1; }
    diff_s "$t0" "$t1"
}

fs_stat_absent() { # MP: stat() of names the listing does not hold; prints stat/s
    limited "$PY" - "$1/$SCALE_DIR" "$ABSENT_STATS" <<'PYEOF'
import os, sys, time
directory, count = sys.argv[1], int(sys.argv[2])
start = time.perf_counter()
for i in range(count):
    try:
        os.stat(f"{directory}/absent-{i:05d}")
        raise SystemExit(f"absent-{i:05d} exists")
    except FileNotFoundError:
        pass
print(f"{count / (time.perf_counter() - start):.0f}")
PYEOF
}

fs_rss() { # prints the current mount's peak RSS in MiB
    awk -v k="$(peak_kib "$CUR_PID")" 'BEGIN { if (k == "") exit 1; printf "%.0f", k / 1024 }'
}

fs_walk() { # MP: find over the million; prints seconds
    local mp="$1" t0 t1 lines
    t0=$(now)
    lines="$(limited find "$mp/$WALK_PREFIX" | wc -l)"
    t1=$(now)
    [[ "$lines" == "$WALK_FIND_LINES" ]] || { echo "fs_walk: $lines entries, want $WALK_FIND_LINES" >&2; return 1; }
    diff_s "$t0" "$t1"
}

scale_fs() {
    local col="$1" base saved=("${BUCKETFS_FLAGS[@]}")
    scale_base
    base="$SCALE_BASE"
    say "$col at $RTT ms: mount for 'scale' (100,000 in one directory)"
    # Names missing from the listing stay known missing while the rows
    # run (the default 5 s is shorter than the listing itself takes here;
    # rclone keeps its directory cache 5 minutes by default).
    BUCKETFS_FLAGS=(--negative-ttl 600)
    local round
    for round in $(seq 1 "$SCALE_ROUNDS"); do
        if mount_column "$col" "scale100k-$round" "$base"; then
            measure ls100k_cold "$col" fs_ls100k "$CUR_MP"
            keep_round ls100k_cold "$col"
            measure ls100k_warm "$col" fs_ls100k "$CUR_MP"
            keep_round ls100k_warm "$col"
            # once, on the last mount
            if ((round == SCALE_ROUNDS)); then
                measure stat100k "$col" fs_stat_absent "$CUR_MP"
                measure rss100k "$col" fs_rss
            fi
        elif ((round == SCALE_ROUNDS)); then
            fail_cells "$col" "mount failed" stat100k rss100k
        fi
        unmount_current
    done
    median_cell ls100k_cold "$col"
    median_cell ls100k_warm "$col"
    BUCKETFS_FLAGS=("${saved[@]}")
    say "$col at $RTT ms: mount for 'scale' (a million objects)"
    if mount_column "$col" scale1m "$base"; then
        measure walk1m "$col" fs_walk "$CUR_MP"
        measure rss1m "$col" fs_rss
    else
        fail_cells "$col" "mount failed" walk1m rss1m
    fi
    unmount_current
}

scale_notes() {
    echo "Scale rows run against Tests/Servers/fake_gcs.py (paging like GCS from a sorted index, bulk seeding); the"
    echo "emulator needs minutes per paged listing of 100,000 objects. curl: the paged listing with delimiter of the"
    echo "directory, and the paged listing without delimiter of the million, asking for the fields bucketfs asks for"
    echo "(StorageMetadata.resourceFields: half of each object resource). Absent names: stat() of names the"
    echo "directory does not hold, after ls -l (each a lookup the mount answers from the listing it holds; bucketfs"
    echo "mounted with --negative-ttl 600 for these rows, as the default 5 s is shorter than the listing takes here)."
    echo "The ls -l rows of 100,000 are medians of $SCALE_ROUNDS rounds (BENCH_SCALE_ROUNDS), each cold one on a fresh mount"
    echo "followed by the warm one on the same mount."
}
