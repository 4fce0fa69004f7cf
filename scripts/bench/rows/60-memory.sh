# shellcheck shell=bash
# Memory: the mount's peak RSS while cp copies a 1 GiB file in (until
# durable) and then out again (to /dev/null, on a fresh mount: cold), with
# the default read-ahead budget (256 MiB); the target is 64 MiB plus the
# budget. The peak is reset between the two (/proc/PID/clear_refs, 5).
#
# Each timing here allocates 2-3 GiB (the staged file, the server's copy,
# the mount's page cache, the block cache), and on this guest the first
# touch of a page its host has taken back (virtio-balloon free page
# reporting) costs about four times a copy into a page touched a moment
# ago. How much of the latter there is depends on what ran before: a cp in
# that left 1 GiB of the mount's page cache, freed at its unmount, made the
# cp out after it 0.5-1 s faster than one that did not, with the same
# reading code (docs/performance.md, "The cold cp out after a direct-I/O
# cp in"). So every timing of the group starts right after 3 GiB of memory
# was filled and freed (settle_memory), and what that took goes to the log.

HUGE_MIB=1024
HUGE_NAME=huge-1GiB.bin

bench_group memory
bench_row mem_in "cp of a 1 GiB file in, until durable: s / peak RSS (MiB)"
bench_row mem_out "cp of it out, cold: s / peak RSS (MiB)"

SETTLE_GIB=3

settle_memory() { # LABEL
    local took
    took="$("$PY" "$HELPER" touch-memory "$SETTLE_GIB" 2>>"$LOG")" || took="failed"
    log "memory: $1: filled and freed $SETTLE_GIB GiB in $took s before the timing"
}

memory_seed() {
    local i
    ensure_big_object
    for i in 1 2 3 4; do cat "$WORK/big.bin"; done >"$WORK/huge.bin"
}

memory_curl() {
    local name="$HUGE_NAME-curl-$RTT" r t0 t1
    settle_memory "curl POST"
    r="$(durable object "$name" "$WORK/huge.bin" --wait -- \
        curl -sS --fail -X POST -T "$WORK/huge.bin" -H 'Expect:' -H 'Content-Type: application/octet-stream' \
        -o /dev/null "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=$(urlenc "$name")")"
    set_cell mem_in curl "$(awk '{ printf "%.2f s", $1 }' <<<"$r")"
    settle_memory "curl GET"
    t0=$(now)
    limited curl -sS --fail -o /dev/null "$BASE/storage/v1/b/$BUCKET/o/$(urlenc "$name")?alt=media"
    t1=$(now)
    set_cell mem_out curl "$(diff_s "$t0" "$t1") s"
    api_delete_one "$name"
}

fs_mem_in() { # MP
    local mp="$1" name="$HUGE_NAME-$CUR_COL-$RTT" r
    settle_memory "$CUR_COL cp in"
    r="$(durable object "$name" "$WORK/huge.bin" --wait -- cp "$WORK/huge.bin" "$mp/$name")"
    awk -v k="$(peak_kib "$CUR_PID")" '{ printf "%.2f s / %.0f", $1, k / 1024 }' <<<"$r"
}

fs_mem_out() { # MP
    local mp="$1" name="$HUGE_NAME-$CUR_COL-$RTT" t0 t1
    settle_memory "$CUR_COL cp out"
    echo 5 >"/proc/$CUR_PID/clear_refs" 2>/dev/null || echo "fs_mem_out: cannot reset the peak RSS" >&2
    t0=$(now)
    limited cp "$mp/$name" /dev/null
    t1=$(now)
    awk -v k="$(peak_kib "$CUR_PID")" -v s="$(diff_s "$t0" "$t1")" 'BEGIN { printf "%.2f s / %.0f", s, k / 1024 }'
}

memory_fs() {
    local col="$1" saved=("${RCLONE_FLAGS[@]}")
    RCLONE_FLAGS=(${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes})
    say "$col at $RTT ms: mount for 'memory' (cp in)"
    if mount_column "$col" memory-in; then
        measure mem_in "$col" fs_mem_in "$CUR_MP"
    else
        fail_cells "$col" "mount failed" mem_in
    fi
    unmount_current
    say "$col at $RTT ms: mount for 'memory' (cp out)"
    if mount_column "$col" memory-out; then
        measure mem_out "$col" fs_mem_out "$CUR_MP"
    else
        fail_cells "$col" "mount failed" mem_out
    fi
    unmount_current
    RCLONE_FLAGS=("${saved[@]}")
    api_delete_one "$HUGE_NAME-$col-$RTT" || true
}

memory_notes() {
    echo "Memory: peak RSS (VmHWM) of the mount process during cp of a 1 GiB file into the mount (until durable) and,"
    echo "on a fresh mount, cp of it to /dev/null; rclone with --vfs-cache-mode writes for both. curl: the time of"
    echo "one media POST and of one GET of the same size. Each timing starts right after $SETTLE_GIB GiB of memory was filled and freed"
    echo "(bench_helper.py touch-memory; its times are in the log), so that it does not depend on how much freshly freed memory"
    echo "the step before it left: on this guest the first touch of memory the host took back costs about 4x a warm copy."
}
