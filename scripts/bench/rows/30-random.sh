# shellcheck shell=bash
# Random 4 KiB reads of the 256 MiB object (seeded by rows/10-read.sh's
# ensure_big_object on this group's own server) on one open file: cold,
# then again (cached). 2,000 reads at 0 ms; at a longer
# round-trip time fewer (every cold read is one round trip), see rand_count.

RAND_BLOCK=4096
RAND_SEED=4096
# Seconds a random-read loop may run before it stops and reports what it
# did (rclone without a VFS cache reads ahead on every seek and is slow).
RAND_DEADLINE="${BENCH_RAND_DEADLINE:-45}"

bench_group random
bench_row rand_cold "random 4 KiB reads, cold (IOPS)"
bench_row rand_warm "random 4 KiB reads, cached (IOPS)"

random_seed() { ensure_big_object; }

rand_count() { if [[ "$RTT" == 0 ]]; then echo 2000; else echo 250; fi; }

rand_offsets() { # the offsets file for this round
    local count file
    count="$(rand_count)"
    file="$WORK/offsets.$count"
    [[ -f "$file" ]] || "$PY" "$HELPER" offsets $((BIG_MIB << 20)) "$count" "$RAND_BLOCK" "$RAND_SEED" >"$file"
    echo "$file"
}

# ranged GETs from one curl process (curl --config with one url/range/output
# block per read, separated by `next`; one kept-alive connection); prints IOPS
curl_rand() {
    local t0 t1 ok count offsets
    count="$(rand_count)"
    offsets="$(rand_offsets)"
    "$PY" "$HELPER" range-config "$BASE/storage/v1/b/$BUCKET/o/${BIG_NAME//\//%2F}?alt=media" \
        "$offsets" "$RAND_BLOCK" >"$WORK/range.cfg"
    t0=$(now)
    limited curl -K "$WORK/range.cfg" >"$WORK/range.codes"
    t1=$(now)
    ok="$(grep -c "^206 $RAND_BLOCK\$" "$WORK/range.codes" || true)"
    [[ "$ok" == "$count" ]] || { echo "curl_rand: $ok of $count ranged GETs were 206 $RAND_BLOCK" >&2; return 1; }
    awk -v n="$count" -v s="$(diff_s "$t0" "$t1")" 'BEGIN { printf "%.0f", n / s }'
}

random_curl() {
    measure rand_cold curl curl_rand
}

fs_rand() { # MP: pread()s at the seeded offsets, bytes checked; prints IOPS
    limited "$PY" "$HELPER" randread "$1/$BIG_NAME" "$(rand_offsets)" "$RAND_BLOCK" \
        --verify "$WORK/big.bin" --deadline "$RAND_DEADLINE"
}

random_fs() {
    run_group "$1" random rand_cold:fs_rand rand_warm:fs_rand
}

random_notes() {
    echo "Random reads: os.pread() of 4 KiB at seeded, 4 KiB-aligned offsets on one open file (2,000 at 0 ms, 250 at"
    echo "20 ms), bytes checked against the source afterwards; curl: as many ranged GETs from one process (--config,"
    echo "\`next\`). A loop still running after ${RAND_DEADLINE} s stops and reports the rate so far. rclone runs"
    echo "without a VFS cache, so its \"cached\" reads are not cached."
}
