# shellcheck shell=bash
# Sequential reads of one 256 MiB object: cold (fresh mount, empty cache),
# again through the same mount (the kernel's page cache, kept across opens
# while the generation is unchanged), and through a fresh mount of the same
# cache directory (bucketfs's block cache on disk). The read alone is timed
# (dd to /dev/null, 1 MiB at a time); the bytes are compared with the
# source afterwards, untimed.

BIG_MIB=256
BIG_NAME="big/random-256MiB.bin"
BIG_SEED=20260719

bench_group read
bench_row seq "read a 256 MiB object, cold (MiB/s)"
bench_row reread_page "read it again, same mount (page cache) (MiB/s)"
bench_row reread_block "read it again, new mount, same cache dir (block cache) (MiB/s)"
bench_row seq_floor "the same read on an in-memory C FUSE filesystem (MiB/s; the FUSE read path's floor, curl column)"
bench_row seq_stream_floor "the same read on a C FUSE filesystem that streams it from the server (MiB/s; the floor of a FUSE mount fed by this server, curl column)"
bench_row seq_cached_floor "the same streaming filesystem writing each 1 MiB block to a local file as it arrives, reads held while it is 96 MiB behind (MiB/s; the floor of a FUSE mount fed by this server that keeps every block on disk, curl column)"
bench_row seq_paired "the cold read against that caching floor run just before it, round by round (median of the rounds' ratios; the floors themselves in brackets)"
bench_row reread_paired "the block-cache re-read against the in-memory floor run just before it, round by round (the same)"
bench_row seq_nocache "the cold read with no block cache (--cache-size 0), a fresh mount (MiB/s)"
bench_row seq_nocache_paired "that read against the streaming floor run just before it, round by round (beside the cold read's pair: what writing every block to the cache costs)"

# the object, in the bucket and in $WORK/big.bin (once; other groups use it)
ensure_big_object() {
    local code
    [[ -f "$WORK/big.bin" ]] || "$PY" "$HELPER" gen-big "$WORK/big.bin" "$BIG_MIB" "$BIG_SEED"
    # once per server: the read and random groups each have their own
    # (use_group_server)
    [[ ! -f "$WORK/big.on.$EMU_NAME" ]] || return 0
    code="$(curl -sS -X POST -T "$WORK/big.bin" -H 'Content-Type: application/octet-stream' \
        -o /dev/null -w '%{http_code}' \
        "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=${BIG_NAME//\//%2F}")"
    [[ "$code" == 200 ]] || { echo "bench: upload of $BIG_NAME answered $code" >&2; return 1; }
    touch "$WORK/big.on.$EMU_NAME"
}

read_seed() { ensure_big_object; }

# the object's media URL at $BASE (through the delay proxy at 20 ms)
big_media_url() { printf '%s/storage/v1/b/%s/o/%s?alt=media' "$BASE" "$BUCKET" "${BIG_NAME//\//%2F}"; }

curl_seq() {
    local t0 t1 size
    t0=$(now)
    size="$(limited curl -sS --fail -o /dev/null -w '%{size_download}' "$(big_media_url)")"
    t1=$(now)
    [[ "$size" == $((BIG_MIB << 20)) ]] || { echo "curl_seq: got $size bytes" >&2; return 1; }
    rate_mib "$size" "$(diff_s "$t0" "$t1")"
}

# Every cell of this group is the median of READ_ROUNDS measurements, each
# cold read on a fresh mount with an empty cache dir: a single dd of a
# fraction of a second caught a busy moment of this shared two-core
# machine more than once (the floor at 114 and 165 MiB/s in full runs,
# against ~900 minutes later).
READ_ROUNDS="${BENCH_READ_ROUNDS:-3}"

read_curl() {
    local round
    for round in $(seq 1 "$READ_ROUNDS"); do
        measure seq curl curl_seq
        keep_round seq curl
        measure seq_floor curl floor_seq
        keep_round seq_floor curl
        measure seq_stream_floor curl stream_floor_seq
        keep_round seq_stream_floor curl
        measure seq_cached_floor curl cached_floor_seq
        keep_round seq_cached_floor curl
    done
    median_cell seq curl
    median_cell seq_floor curl
    median_cell seq_stream_floor curl
    median_cell seq_cached_floor curl
}

# The read on scripts/bench/read_floor.c: a libfuse3 low-level filesystem
# serving the same bytes from memory, with the loop bucketfs uses and the
# kernel read-ahead bucketfs sets for itself (FLOOR_READ_AHEAD_KB). What the
# kernel's FUSE read path costs before a filesystem does any work.
FLOOR_READ_AHEAD_KB="${BENCH_FLOOR_READ_AHEAD_KB:-16384}"
floor_seq() { c_fuse_seq read_floor "" "$WORK/big.bin"; }

# The read on scripts/bench/stream_floor.c: read_floor's filesystem whose
# first open GETs the object from the server ($BASE, as curl and bucketfs
# see it) and answers each read once its bytes have arrived. What a FUSE
# mount fed by this server reaches when the server, the HTTP receive and
# the FUSE path share the machine, before the filesystem does any work.
stream_floor_seq() { c_fuse_seq stream_floor "-lcurl -lpthread" "$(big_media_url)" $((BIG_MIB << 20)); }

# The same filesystem keeping every block on local disk as it arrives (its
# CACHE_FILE in $WORK, where the mounts' cache dirs are; a new file each
# time, allocated before the mount): what any mount that caches every
# block of a cold read, as bucketfs must, reaches on these cores.
cached_floor_seq() {
    local blocks="$WORK/cached-floor.blocks" rc=0
    rm -f "$blocks"
    c_fuse_seq stream_floor "-lcurl -lpthread" "$(big_media_url)" $((BIG_MIB << 20)) "$blocks" || rc=$?
    rm -f "$blocks"
    return "$rc"
}

# c_fuse_seq NAME LIBS ARGS...: scripts/bench/NAME.c, built here with cc
# (fuse3 and LIBS) the first time, mounted on a directory of its own with
# ARGS after the mountpoint and FLOOR_READ_AHEAD_KB as read-ahead, its one
# file read by fs_seq under the object's name; unmounted after
c_fuse_seq() {
    local name="$1" libs bin="$WORK/$1" mp="$WORK/mnt-$1" tree="$WORK/tree-$1" pid out rc=0
    read -r -a libs <<<"$2"
    shift 2
    # shellcheck disable=SC2046 # pkg-config's flags are words
    [[ -x "$bin" ]] || cc -O2 -o "$bin" "$REPO/scripts/bench/$name.c" $(pkg-config --cflags --libs fuse3) "${libs[@]}"
    mkdir -p "$mp" "$tree"
    "$bin" "$mp" "$@" &
    pid=$!
    PIDS+=("$pid")
    MOUNTS+=("$mp")
    for _ in $(seq 1 200); do is_mounted "$mp" && break; sleep 0.05; done
    is_mounted "$mp" || { echo "$name: no mount" >&2; return 1; }
    echo "$FLOOR_READ_AHEAD_KB" >"/sys/class/bdi/$(mountpoint -d "$mp")/read_ahead_kb"
    # fs_seq reads MP/$BIG_NAME: the filesystem's one file under that name
    mkdir -p "$tree/$(dirname "$BIG_NAME")"
    ln -sfn "$mp/file" "$tree/$BIG_NAME"
    out="$(fs_seq "$tree")" || rc=$?
    fusermount3 -u "$mp" || fusermount3 -uz "$mp"
    wait_gone "$pid" 10 || stop_pid "$pid"
    ((rc == 0)) || return "$rc"
    echo "$out"
}

fs_seq() { # MP: dd of the big file alone, then the bytes compared; prints MiB/s
    local mp="$1" t0 t1 bytes
    settle_disk
    t0=$(now)
    limited dd if="$mp/$BIG_NAME" of=/dev/null bs=1M 2>"$WORK/dd.err"
    t1=$(now)
    cat "$WORK/dd.err" >&2
    bytes="$(awk '/bytes/ { print $1; exit }' "$WORK/dd.err")"
    [[ "$bytes" == $((BIG_MIB << 20)) ]] || { echo "fs_seq: dd copied $bytes bytes" >&2; return 1; }
    limited cmp "$mp/$BIG_NAME" "$WORK/big.bin" >&2 || { echo "fs_seq: the bytes read differ from the object's" >&2; return 1; }
    rate_mib "$bytes" "$(diff_s "$t0" "$t1")"
}

read_fs() {
    local col="$1" round row rows=(seq reread_page reread_block) paired=()
    [[ "$col" != bucketfs ]] || paired=(seq_paired reread_paired seq_nocache seq_nocache_paired)
    rows+=("${paired[@]}")
    for round in $(seq 1 "$READ_ROUNDS"); do
        # a round whose mount fails keeps no ratio of an earlier round
        for row in "${paired[@]}"; do set_cell "$row" "$col" error; done
        read_round "$col" "read$round"
        for row in "${rows[@]}"; do keep_round "$row" "$col"; done
    done
    for row in "${rows[@]}"; do median_cell "$row" "$col"; done
}

# On this shared two-core VM a floor's rounds can differ 4x within one
# group (the in-memory floor at 624, 2098 and 2876 MiB/s in one run), so
# a median of bucketfs's rounds against a median of the floor's taken a
# minute earlier can pass or miss by chance. These cells pair each of
# bucketfs's rounds with a floor run right before it: the floor's dd,
# then bucketfs's, on the same machine moment.

# floor_then ROW FLOOR_FUNC MEASURED_ROW COLUMN: runs FLOOR_FUNC (MiB/s) and
# stores it for paired_cell; call before measuring MEASURED_ROW
declare -A PAIRED_FLOOR=()
floor_then() {
    local out
    out="$("$2" 2>>"$LOG" | tail -n 1)" || out=""
    log "    floor for $1 before $3 / $4: ${out:-failed}"
    PAIRED_FLOOR[$1]="$out"
}

# paired_cell ROW MEASURED_ROW COLUMN: the cell becomes MEASURED_ROW's
# cell divided by the floor floor_then stored, "0.65 (831)"; error when
# either failed
paired_cell() {
    set_cell "$1" "$3" "$(paired_ratio "${CELL[$2,$3,$(cell_at)]:-}" "${PAIRED_FLOOR[$1]:-}")"
}

# read_round COLUMN NAME: one cold read on a fresh mount (an empty cache
# dir of its own, named after NAME), the page-cache re-read in it, and the
# block-cache re-read on a new mount of the same cache dir
read_round() {
    local col="$1" name="$2" cache cached
    say "$col at $RTT ms: mount for 'read' ($name)"
    if ! mount_column "$col" "$name"; then
        fail_cells "$col" "mount failed" seq reread_page reread_block
        unmount_current
        return 0
    fi
    [[ "$col" != bucketfs ]] || floor_then seq_paired cached_floor_seq seq "$col"
    measure seq "$col" fs_seq "$CUR_MP"
    [[ "$col" != bucketfs ]] || paired_cell seq_paired seq "$col"
    measure reread_page "$col" fs_seq "$CUR_MP"
    note_peak "$col"
    unmount_current
    # The same cache directory again (rclone: its own, still without a VFS
    # cache, so this read goes to the network again).
    cache="$WORK/cache-$col-$name-$RTT"
    if [[ "$col" == bucketfs ]]; then
        # A block the cold read could not cache (its write queue was full:
        # the disk took the blocks slower than the network gave them) is
        # a download again in the re-read; the cell says how many blocks
        # the cache held when it is not all of them (as the new mount's
        # status counts them: it reads the cache's index at start).
        CUR_COL=bucketfs
        mount_bucketfs "re$name" "$BASE" "$cache" "${BUCKETFS_FLAGS[@]}" || { fail_cells "$col" "mount failed" reread_block; unmount_current; return 0; }
        cached="$("$BIN" status "$CUR_MP" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["filesystem"]["caches"]["blockCacheBlocks"])' || echo 0)"
        log "block cache before the re-read: $cached blocks of $BIG_MIB"
    else
        mount_column "$col" "re$name" || { fail_cells "$col" "mount failed" reread_block; unmount_current; return 0; }
    fi
    [[ "$col" != bucketfs ]] || floor_then reread_paired floor_seq reread_block "$col"
    measure reread_block "$col" fs_seq "$CUR_MP"
    [[ "$col" != bucketfs ]] || paired_cell reread_paired reread_block "$col"
    if [[ "$col" == bucketfs ]] && ((cached < BIG_MIB)) && [[ "${CELL[reread_block,$col,$RTT]}" != error ]]; then
        set_cell reread_block "$col" "${CELL[reread_block,$col,$RTT]} ($cached of $BIG_MIB blocks cached)"
    fi
    note_peak "$col"
    unmount_current
    [[ "$col" == bucketfs ]] || return 0
    # The cold read once more on a mount without a block cache: beside the
    # cold read's own pair, what caching every block costs on these cores.
    CUR_COL=bucketfs
    mount_bucketfs "nc$name" "$BASE" "" "${BUCKETFS_FLAGS[@]}" --cache-size 0 || { fail_cells "$col" "mount failed" seq_nocache; unmount_current; return 0; }
    floor_then seq_nocache_paired stream_floor_seq seq_nocache "$col"
    measure seq_nocache "$col" fs_seq "$CUR_MP"
    paired_cell seq_nocache_paired seq_nocache "$col"
    unmount_current
}

read_notes() {
    echo "Reads: each cell is the median of $READ_ROUNDS rounds, each cold read on a fresh mount with an empty cache dir."
    echo "dd of the object to /dev/null (bs=1M) is timed alone, after a sync; cmp with the source follows, untimed. curl: one"
    echo "GET of the whole object to /dev/null. Page cache: a second dd in the same mount (a new open; bucketfs keeps"
    echo "the kernel's pages while the generation is unchanged). Block cache: a fresh mount on the same cache dir"
    echo "(rclone runs without a VFS cache, so its re-reads go to the network). Floor: the same dd on scripts/bench/read_floor.c"
    echo "(libfuse3 low-level, the object's bytes in memory, the loop bucketfs uses, read_ahead_kb $FLOOR_READ_AHEAD_KB as bucketfs sets)."
    echo "Stream floor: the same dd on scripts/bench/stream_floor.c (read_floor's filesystem whose first open starts one GET of"
    echo "the object from the server, as curl's, into one buffer touched before the mount; each read answered once its bytes have arrived)."
    echo "Caching floor: stream_floor with a cache file, which a thread of its own fills with each 1 MiB block (pwrite) once"
    echo "it has arrived, a read waiting while that thread is over 96 MiB behind (bucketfs's mark); the file is allocated"
    echo "before the mount, nothing is checksummed or indexed."
    echo "Paired rows: in each of bucketfs's rounds the floor's dd runs right before bucketfs's (the caching floor before the"
    echo "cold read, once the mount is up; the in-memory floor before the block-cache re-read), and the cell is the median of"
    echo "the rounds' bucketfs/floor ratios, so a moment when this machine is slow weighs on both sides of a ratio."
    echo "No block cache: each round ends with the cold read once more on a fresh mount with --cache-size 0, paired with"
    echo "the stream floor the same way; beside the cold read's pair it shows what writing every block to the cache costs."
}
