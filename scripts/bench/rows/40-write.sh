# shellcheck shell=bash
# Writes until durable: a 256 MiB file, 300 files of 4 KiB, and rm -rf of
# 1,000 files; plus how many requests each small file costs.
#
# "Durable" is judged through the JSON API, the same way for every column:
# scripts/bench/until_durable.py starts the timer, runs the command, then
# looks at the bucket until the objects are there with their full size (for
# bucketfs, whose close returns after the upload, the first look already
# sees them; rclone with --vfs-cache-mode writes uploads after close
# returned, so that look is repeated every 50-100 ms). Every column writes
# its own names and the objects are deleted through the API afterwards
# (untimed), so each column meets the same bucket.

WBIG_NAME_PREFIX="written-256MiB"
SMALL_COUNT=300
SMALL_SIZE=4096
RMTREE_FILES=1000 # 10 directories x 100 files (bench_helper.py RMTREE_SHAPE)
FUSE_COUNT_FILES=20
DURABLE="$REPO/scripts/bench/until_durable.py"

bench_group write
bench_row wbig "write a 256 MiB file, until durable (MiB/s)"
bench_row wbig_resumable "the same file as a resumable upload in 64 MiB chunks, the protocol of a streamed write (MiB/s, curl column)"
bench_row wbig_multipart "the same file as one multipart POST with its metadata, chunked, the protocol of bucketfs's one request for a file with metadata to keep: mode, owner, xattrs (MiB/s, curl column)"
bench_row wbig_floor "the same cp on an in-memory C FUSE filesystem (MiB/s; the FUSE write path's floor, curl column)"
bench_row wbig_overlap "that cp and curl's media POST side by side, until both end (MiB/s; the most a mount that uploads while the file is written reaches on these cores, curl column)"
bench_row wbig_paired "the 256 MiB write against curl's media POST run just before it, round by round (median of the rounds' ratios; the POSTs themselves in brackets)"
bench_row wbig_staged_overlap "the cp on that filesystem keeping each file on local disk too, beside curl's chunked media POST of the source file, until both end (MiB/s; curl does not wait for the cp's bytes, so no bound for a mount, curl column)"
bench_row wbig_staged_stream "the cp on that filesystem staging each file on local disk and sending it from there as it is written, in one chunked media POST (libcurl), close waiting for the answer (MiB/s; the design bucketfs follows, in C with nothing else, curl column)"
bench_row wbig_staged_paired "the 256 MiB write against that staging filesystem run just before it, round by round (median of the rounds' ratios; its rounds in brackets)"
bench_row wbig_stage_probe "256 MiB written into a new local file in 1 MiB pwrites, right before each of bucketfs's rounds: the copy into new page-cache pages that staging costs at that moment (s; the median, the rounds in brackets, curl column)" s
bench_row wsmall "300 files of 4 KiB into a new dir, until durable (files/s)"
bench_row wsmall_http "HTTP requests per small file (of the 300)"
bench_row wsmall_fuse "FUSE requests per small file (bash \`printf > f\`)"
bench_row wsmall_floor "the same 300 files on an in-memory C FUSE filesystem (files/s; the FUSE path's floor, curl column)"
bench_row wsmall_ceiling "ceiling for any FUSE mount durable at close: 1 / (1/floor + 1/curl) (files/s, curl column)"
bench_row rmtree "rm -rf of 1,000 files in 10 dirs (s)" s

write_seed() {
    ensure_big_object
    "$PY" "$HELPER" gen-text "$WORK/small.txt" "$SMALL_SIZE"
}

# durable CHECK... [--wait] [--stdout FILE] -- CMD...: until_durable.py with
# the workload time limit (its own deadline a little earlier, so that it can
# say what it saw)
durable() {
    local deadline=$((WORKLOAD_TIMEOUT > 10 ? WORKLOAD_TIMEOUT - 5 : WORKLOAD_TIMEOUT))
    settle_disk
    limited "$PY" "$DURABLE" "$EMU_BASE" "$BUCKET" --deadline "$deadline" "$@"
}

urlenc() { "$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# api_delete KIND...: deletes the objects of the bench_helper.py KINDs (one
# curl process, straight to the emulator); a name already gone is fine
api_delete() {
    "$PY" "$HELPER" delete-config "$EMU_BASE" "$BUCKET" "$@" >"$WORK/cleanup.cfg"
    curl -K "$WORK/cleanup.cfg" >"$WORK/cleanup.codes"
    if grep -qv -e '^20[04]$' -e '^404$' "$WORK/cleanup.codes"; then
        echo "api_delete $*: $(sort "$WORK/cleanup.codes" | uniq -c | tr '\n' ' ')" >&2
        return 1
    fi
}

api_delete_one() { # NAME
    local code
    code="$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$EMU_BASE/storage/v1/b/$BUCKET/o/$(urlenc "$1")")"
    [[ "$code" == 200 || "$code" == 204 || "$code" == 404 ]] || { echo "delete $1: $code" >&2; return 1; }
}

# seed_rmtree PREFIX: the 1,000 objects rm -rf will delete, uploaded with curl
seed_rmtree() {
    local ok
    "$PY" "$HELPER" upload-config "$EMU_BASE" "$BUCKET" "rmtree:$1" >"$WORK/rmtree-seed.cfg"
    curl -K "$WORK/rmtree-seed.cfg" >"$WORK/rmtree-seed.codes"
    ok="$(grep -c '^200$' "$WORK/rmtree-seed.codes" || true)"
    [[ "$ok" == "$RMTREE_FILES" ]] || { echo "seed_rmtree $1: $ok of $RMTREE_FILES uploads succeeded" >&2; return 1; }
}

# cells: "MiB/s (seconds)", "files/s (seconds)"; the argument is what
# until_durable.py printed (TOTAL CMD LOOKS)
cell_big() { awk -v n=$((BIG_MIB << 20)) '{ if ($1 <= 0) exit 1; printf "%.0f (%.2f s)", n / 1048576 / $1, $1 }' <<<"$1"; }
cell_small() { awk -v n="$SMALL_COUNT" '{ if ($1 <= 0) exit 1; printf "%.0f (%.2f s)", n / $1, $1 }' <<<"$1"; }

# requests the timed command sent per small file: the emulator's requests
# during it, minus the listings until_durable.py made (one per look)
note_small_requests() { # COLUMN BEFORE AFTER DURABLE_OUTPUT
    local col="$1" sent looks
    looks="$(awk '{ print $3 }' <<<"$4")"
    sent=$(($3 - $2 - looks))
    log "    $col: $sent requests for $SMALL_COUNT files (besides $looks looks): $(request_summary "$2" | head -c 300)"
    awk -v n="$sent" -v f="$SMALL_COUNT" 'BEGIN { printf "%.2f", n / f }' >"$WORK/wsmall_http.$col"
}

# ---------------------------------------------------------------- curl

# media_post NAME [CURL_ARG...]: sets MEDIA_POST to the curl command that
# sends big.bin as object NAME in one media upload (uploadType=media, -T
# streams the file with a Content-Length unless a CURL_ARG says chunked;
# "Expect:" off, as bucketfs's Transport does)
media_post() {
    MEDIA_POST=(curl -sS --fail -X POST -T "$WORK/big.bin" -H 'Expect:' -H 'Content-Type: application/octet-stream' "${@:2}"
        -o /dev/null "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=$(urlenc "$1")")
}

curl_wbig() {
    local name="$WBIG_NAME_PREFIX-curl-$RTT-${MEDIAN_ROUND:-1}.bin" r cpu
    media_post "$name"
    cpu="$(server_cpu_seconds)"
    r="$(durable object "$name" "$WORK/big.bin" --wait -- "${MEDIA_POST[@]}")"
    log "    server CPU during curl's POST: $(server_cpu_since "$cpu") s"
    api_delete_one "$name"
    cell_big "$r"
}

# the same bytes through a resumable session in bucketfs's stream steps
# (MountOptions.streamChunkSize, 64 MiB), the chunks split off untimed
curl_wbig_resumable() {
    local name="$WBIG_NAME_PREFIX-curl-resumable-$RTT.bin" chunks="$WORK/big.chunks" r
    if [[ ! -d "$chunks" ]]; then
        mkdir -p "$chunks"
        split -b 64M -d -a 3 "$WORK/big.bin" "$chunks/part"
    fi
    r="$(durable object "$name" "$WORK/big.bin" --wait -- \
        "$REPO/scripts/bench/resumable_put.sh" "$BASE" "$BUCKET" "$name" "$WORK/big.bin" "$chunks")"
    api_delete_one "$name"
    cell_big "$r"
}

# the same bytes as one multipart/related POST whose first part is the
# object's resource (name, content type, a custom metadata key), sent with
# chunked transfer encoding: what bucketfs's one request near the store
# sends for a file with metadata to keep (StorageKit's OneRequestStream; a
# new file with nothing but its type goes as a media POST, as curl_wbig's).
# The body file is built untimed.
MULTIPART_BOUNDARY="bench-boundary-7f3a9c"
multipart_body() { # NAME BODY: writes the multipart/related body for object NAME
    {
        printf -- '--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n' "$MULTIPART_BOUNDARY"
        printf '{"contentType":"application/octet-stream","metadata":{"goog-reserved-file-mtime":"1795870000"},"name":"%s"}' "$1"
        printf -- '\r\n--%s\r\nContent-Type: application/octet-stream\r\n\r\n' "$MULTIPART_BOUNDARY"
        cat "$WORK/big.bin"
        printf -- '\r\n--%s--\r\n' "$MULTIPART_BOUNDARY"
    } >"$2"
}

# multipart_post BODY: sets MULTIPART_POST to the curl command that sends a
# body multipart_body wrote as one chunked POST (an array, so that
# until_durable.py can run it too)
multipart_post() {
    MULTIPART_POST=(curl -sS --fail -X POST -T "$1" -H 'Expect:' -H 'Transfer-Encoding: chunked'
        -H "Content-Type: multipart/related; boundary=$MULTIPART_BOUNDARY"
        -o /dev/null "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=multipart&ifGenerationMatch=0")
}

curl_wbig_multipart() {
    local name="$WBIG_NAME_PREFIX-curl-multipart-$RTT-${MEDIAN_ROUND:-1}.bin" body="$WORK/big.multipart" r
    multipart_body "$name" "$body"
    multipart_post "$body"
    r="$(durable object "$name" "$WORK/big.bin" --wait -- "${MULTIPART_POST[@]}")"
    rm -f "$body"
    api_delete_one "$name"
    cell_big "$r"
}

# 300 media uploads, sequential, in ONE curl process (curl --config, one
# block per file separated by `next`, one kept-alive connection)
curl_wsmall() {
    local prefix="small-curl-$RTT/" r ok before
    "$PY" "$HELPER" files-config "$BASE" "$BUCKET" "$prefix" "$SMALL_COUNT" "$WORK/small.txt" >"$WORK/files.cfg"
    before="$(request_count)"
    r="$(durable objects "$prefix" "$SMALL_COUNT" "$WORK/small.txt" --wait --stdout "$WORK/files.codes" -- \
        curl -K "$WORK/files.cfg")"
    note_small_requests curl "$before" "$(request_count)" "$r"
    ok="$(grep -c '^200$' "$WORK/files.codes" || true)"
    [[ "$ok" == "$SMALL_COUNT" ]] || { echo "curl_wsmall: $ok of $SMALL_COUNT uploads answered 200" >&2; return 1; }
    api_delete "files:$prefix:$SMALL_COUNT"
    cell_small "$r"
}

# 1,000 DELETEs, sequential, in ONE curl process (curl --config)
curl_rmtree() {
    local prefix="rmtree-curl-$RTT" r ok
    seed_rmtree "$prefix"
    "$PY" "$HELPER" delete-config "$BASE" "$BUCKET" "rmtree:$prefix" >"$WORK/rmtree.cfg"
    r="$(durable none "$prefix/" --stdout "$WORK/rmtree.codes" -- curl -K "$WORK/rmtree.cfg")"
    ok="$(grep -c -e '^200$' -e '^204$' "$WORK/rmtree.codes" || true)"
    [[ "$ok" == "$RMTREE_FILES" ]] || { echo "curl_rmtree: $ok of $RMTREE_FILES DELETEs answered 200/204" >&2; return 1; }
    awk '{ printf "%.2f", $2 }' <<<"$r"
}

cat_file() { cat "$1"; }

# scripts/bench/null_fuse.c (built here with cc): a libfuse3 low-level
# filesystem that keeps names and sizes in memory and does no work,
# mounted with the loop bucketfs uses: what the kernel's FUSE path costs
# before a filesystem does anything. null_fuse_mount sets NULL_MP and
# NULL_PID; null_fuse_unmount ends it.
null_fuse_mount() { # [STAGE_DIR [UPLOAD_URL]]: also keep each file's bytes there (and upload them)
    local bin="$WORK/null_fuse"
    NULL_MP="$WORK/mnt-null"
    [[ -x "$bin" ]] || cc -O2 -o "$bin" "$REPO/scripts/bench/null_fuse.c" $(pkg-config --cflags --libs fuse3) -lcurl -lpthread
    mkdir -p "$NULL_MP" ${1:+"$1"}
    "$bin" "$NULL_MP" "$@" &
    NULL_PID=$!
    PIDS+=("$NULL_PID")
    MOUNTS+=("$NULL_MP")
    for _ in $(seq 1 100); do is_mounted "$NULL_MP" && break; sleep 0.05; done
    is_mounted "$NULL_MP" || { echo "null_fuse_mount: no mount" >&2; return 1; }
}

null_fuse_unmount() {
    fusermount3 -u "$NULL_MP" || fusermount3 -uz "$NULL_MP"
    wait_gone "$NULL_PID" 10 || stop_pid "$NULL_PID"
}

# The small-file loop on the null filesystem.
null_fuse_small() {
    local t0 t1
    null_fuse_mount || return 1
    mkdir "$NULL_MP/small"
    t0=$(now)
    write_small_files "$NULL_MP/small" "$SMALL_COUNT"
    t1=$(now)
    null_fuse_unmount
    cell_small "$(diff_s "$t0" "$t1")"
}

# The 256 MiB cp on the null filesystem.
null_fuse_big() {
    local t0 t1
    null_fuse_mount || return 1
    settle_disk
    t0=$(now)
    cp "$WORK/big.bin" "$NULL_MP/big-${MEDIAN_ROUND:-1}.bin" || { null_fuse_unmount; return 1; }
    t1=$(now)
    null_fuse_unmount
    cell_big "$(diff_s "$t0" "$t1")"
}

# That cp and curl's media POST of the same file started together, timed
# until both ended: the FUSE write path and the server's receiving share
# this machine's cores, so a mount whose close returns once the object is
# durable ends no sooner, however it overlaps the two.
overlap_big() {
    local name="$WBIG_NAME_PREFIX-overlap-$RTT-${MEDIAN_ROUND:-1}.bin" rc=0
    media_post "$name"
    side_by_side "" "${MEDIA_POST[@]}" || rc=1
    api_delete_one "$name" || rc=1
    return "$rc"
}

# The same with what bucketfs's design adds on both sides: the cp on
# null_fuse staging each file on local disk (in $WORK, where the mounts'
# cache dirs are), and curl sending the object as one chunked media POST
# (its length unknown, as bucketfs's request that follows the file).
# bucketfs does both and also reads the staged bytes back to send them.
staged_overlap_big() {
    local name="$WBIG_NAME_PREFIX-staged-overlap-$RTT-${MEDIAN_ROUND:-1}.bin" rc=0
    media_post "$name" -H 'Transfer-Encoding: chunked'
    side_by_side "$WORK/null-stage" "${MEDIA_POST[@]}" || rc=1
    api_delete_one "$name" || rc=1
    return "$rc"
}

# SPEC's design for a file written in order near the store, with nothing
# of bucketfs: null_fuse staging each file on local disk and sending the
# staged bytes as they land, read back from disk, in one chunked media POST
# (libcurl, in a thread of its own), its close waiting for the answer
# (scripts/bench/null_fuse.c, UPLOAD_URL). Timed as bucketfs's rounds are:
# until_durable.py around the cp, the object's MD5 checked.
STAGED_STREAM_DIR="$WORK/null-stage-stream"
staged_stream_mount() {
    null_fuse_mount "$STAGED_STREAM_DIR" "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name="
}

staged_stream_once() { # NAME (URL-safe): prints what until_durable.py printed
    local name="$1" r cpu
    cpu="$(server_cpu_seconds)"
    r="$(durable object "$name" "$WORK/big.bin" --wait -- cp "$WORK/big.bin" "$NULL_MP/$name")" || return 1
    log "    server CPU during the staging C filesystem's cp: $(server_cpu_since "$cpu") s"
    api_delete_one "$name" || return 1
    echo "$r"
}

staged_stream_big() {
    local r rc=0
    staged_stream_mount || return 1
    r="$(staged_stream_once "$WBIG_NAME_PREFIX-staged-stream-$RTT-${MEDIAN_ROUND:-1}.bin")" || rc=1
    null_fuse_unmount
    [[ "$rc" == 0 ]] && cell_big "$r"
}

# side_by_side STAGE_DIR CMD...: the 256 MiB cp on null_fuse (staging in
# STAGE_DIR unless empty) and CMD started together, timed until both end;
# prints the cell
side_by_side() {
    local stage="$1" t0 t1 cp_pid ok=0
    shift
    null_fuse_mount ${stage:+"$stage"} || return 1
    settle_disk
    t0=$(now)
    cp "$WORK/big.bin" "$NULL_MP/big.bin" &
    cp_pid=$!
    "$@" || ok=1
    wait "$cp_pid" || ok=1
    t1=$(now)
    null_fuse_unmount
    [[ "$ok" == 0 ]] || { echo "side_by_side: cp or $1 failed" >&2; return 1; }
    cell_big "$(diff_s "$t0" "$t1")"
}

# 1 / (seconds per file on the null filesystem + seconds per curl upload):
# a mount whose close returns only when the object is durable cannot
# overlap the two, so no such mount can pass this on this machine
small_ceiling() {
    local curl_rate="${CELL[wsmall,curl,$RTT]%% *}" floor_rate="${CELL[wsmall_floor,curl,$RTT]%% *}"
    [[ "$curl_rate" =~ ^[0-9]+$ && "$floor_rate" =~ ^[0-9]+$ ]] || { echo "small_ceiling: no curl or floor figure" >&2; return 1; }
    awk -v a="$curl_rate" -v b="$floor_rate" 'BEGIN { printf "%.0f", 1 / (1 / a + 1 / b) }'
}

# The 256 MiB write is the median of this many rounds (each a new object
# name's upload, deleted after): single rounds moved by half between runs.
WBIG_ROUNDS="${BENCH_WRITE_ROUNDS:-3}"

# Two untimed media uploads of the 256 MiB file (deleted after), before
# each column's rounds: fake-gcs-server takes the first uploads after it
# has been idle at a third of its pace (a fresh server's six uploads in a
# row: 2.2, 1.2, 0.64, 0.65, 0.66, 0.56 s; the same with GOGC=400 or with
# no collection up to 4 GiB: the first ones are slow too, so it is the
# memory it gets from the system, not its collector), and the write
# group's other rows leave it idle long enough to give that memory back.
# Without this a column's rounds measured where in that cycle it came.
warm_server() {
    local i name
    for i in 1 2; do
        name="$WBIG_NAME_PREFIX-warm-$RTT-$i.bin"
        media_post "$name"
        "${MEDIA_POST[@]}" || return 1
        api_delete_one "$name" || return 1
    done
}

write_curl() {
    warm_server >&2 || echo "warm_server failed" >&2
    measure wbig curl median_of "$WBIG_ROUNDS" curl_wbig
    measure wbig_multipart curl median_of "$WBIG_ROUNDS" curl_wbig_multipart
    measure wbig_resumable curl curl_wbig_resumable
    measure wbig_floor curl median_of "$WBIG_ROUNDS" null_fuse_big
    warm_server >&2 || echo "warm_server failed" >&2
    measure wbig_overlap curl median_of "$WBIG_ROUNDS" overlap_big
    measure wbig_staged_overlap curl median_of "$WBIG_ROUNDS" staged_overlap_big
    measure wbig_staged_stream curl median_of "$WBIG_ROUNDS" staged_stream_big
    measure wsmall curl curl_wsmall
    measure wsmall_http curl cat_file "$WORK/wsmall_http.curl"
    measure wsmall_floor curl null_fuse_small
    measure wsmall_ceiling curl small_ceiling
    measure rmtree curl curl_rmtree
}

# ---------------------------------------------------------------- mounts

fs_wbig() { # MP: cp of the 256 MiB file into the mount's root
    local mp="$1" name="$WBIG_NAME_PREFIX-$CUR_COL-$RTT-${MEDIAN_ROUND:-1}.bin" r media="" staged="" cell cpu mount_cpu
    if [[ "$CUR_COL" == bucketfs ]]; then
        media="$(curl_wbig 2>>"$LOG")" || media=""
        log "    just before: media POST ${media:-failed}"
        # null_fuse with UPLOAD_URL, mounted by write_fs around bucketfs's rows
        staged="$(staged_stream_once "$WBIG_NAME_PREFIX-staged-paired-$RTT-${MEDIAN_ROUND:-1}.bin" 2>>"$LOG")" &&
            staged="$(cell_big "$staged")" || staged=""
        log "    just before: the staging C filesystem ${staged:-failed}"
    fi
    if [[ "$CUR_COL" == bucketfs ]]; then
        # The machine's price for fresh page-cache pages, on the disk the
        # staged files are on (docs/performance.md, "Write-only handles")
        local probe
        probe="$(sync && "$PY" "$HELPER" pwrite-new "$WORK/stage-probe.bin" 256 2>>"$LOG")" || probe=""
        log "    just before: 256 MiB into a new local file ${probe:-failed} s"
        [[ -z "$probe" ]] || echo "$probe" >>"$WORK/wbig_stage_probe.$CUR_COL"
    fi
    cpu="$(server_cpu_seconds)"
    mount_cpu="$(cpu_seconds_of "$CUR_PID")"
    r="$(durable object "$name" "$WORK/big.bin" --wait -- cp "$WORK/big.bin" "$mp/$name")"
    log "    server CPU during $CUR_COL's cp: $(server_cpu_since "$cpu") s; the mount's: $(seconds_between "$mount_cpu" "$(cpu_seconds_of "$CUR_PID")") s"
    api_delete_one "$name"
    cell="$(cell_big "$r")"
    # These rounds run inside measure's subshell, so the ratios go to files
    # in $WORK that write_fs reads (as wsmall_http's count does).
    if [[ "$CUR_COL" == bucketfs ]]; then
        paired_ratio "$cell" "$media" >>"$WORK/wbig_paired.$CUR_COL"
        paired_ratio "$cell" "$staged" >>"$WORK/wbig_staged_paired.$CUR_COL"
    fi
    echo "$cell"
}

fs_wbig_median() {
    warm_server >&2 || echo "warm_server failed" >&2
    median_of "$WBIG_ROUNDS" fs_wbig "$1"
}

# writes COUNT files of the 4 KiB text into DIR from one bash process with
# builtins only (printf of a variable into each file, no fork per file)
write_small_files() { # DIR COUNT [PATH: looked up after the first file]
    # shellcheck disable=SC2016 # expanded by the inner bash
    bash -c '
        data="$(<"$1")"
        for ((i = 0; i < $3; i++)); do
            printf -v name "%s/f%03d" "$2" "$i"
            printf "%s" "$data" >"$name"
            if ((i == 0)) && [[ -n "$4" ]]; then [[ -e "$4" ]] || true; fi
        done' _ "$WORK/small.txt" "$1" "$2" "${3:-}"
}

# 300 files of 4 KiB into a directory made just before (mkdir untimed)
fs_wsmall() { # MP
    local mp="$1" dir="small-$CUR_COL-$RTT" r before
    mkdir "$mp/$dir"
    before="$(request_count)"
    # shellcheck disable=SC2016 # expanded by that bash
    r="$(durable objects "$dir/" "$SMALL_COUNT" "$WORK/small.txt" --wait -- \
        bash -c 'write_small_files "$1" "$2"' _ "$mp/$dir" "$SMALL_COUNT")"
    note_small_requests "$CUR_COL" "$before" "$(request_count)" "$r"
    api_delete "files:$dir/:$SMALL_COUNT"
    api_delete_one "$dir/" # bucketfs's mkdir placeholder, if any
    cell_small "$r"
}
export -f write_small_files
export WORK

# rm -rf of the tree seeded (through the API, before this mount) as
# rmtree-COLUMN; the time until rm returns, and nothing may be left under
# the prefix at that moment
fs_rmtree() { # MP
    local mp="$1" prefix="rmtree-$CUR_COL-$RTT" r
    r="$(durable none "$prefix/" -- rm -rf "$mp/$prefix")"
    awk '{ printf "%.2f", $2 }' <<<"$r"
}

# FUSE requests per file of the same bash loop, counted in libfuse's own
# request trace (a foreground mount with --log-level trace, which passes
# libfuse -d) between two marker lookups; the opcodes go to the log
fuse_requests_per_file() {
    local mp="$WORK/mnt-trace" trace="$WORK/fuse-trace.txt" pid counts
    mkdir -p "$mp" "$WORK/cache-trace"
    "$BIN" mount --foreground --log-level trace --endpoint "$BASE" --anonymous "gs://$BUCKET" "$mp" \
        --cache-dir "$WORK/cache-trace" >/dev/null 2>"$trace" &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 1 200); do is_mounted "$mp" && break; sleep 0.05; done
    is_mounted "$mp" || { echo "fuse_requests_per_file: no mount" >&2; return 1; }
    mkdir "$mp/trace-$RTT"
    # the first file of a bash process is not counted: bash's printf writes
    # it in 64-byte pieces when the file's st_blksize is above 4096 (once per
    # process; every later file is one 4032-byte and one 64-byte write)
    write_small_files "$mp/trace-$RTT" "$((FUSE_COUNT_FILES + 1))" "$mp/trace-$RTT/.begin-marker"
    stat "$mp/trace-$RTT/.end-marker" >/dev/null 2>&1 || true
    fusermount3 -u "$mp" || fusermount3 -uz "$mp"
    wait_gone "$pid" 10 || stop_pid "$pid"
    api_delete "files:trace-$RTT/:$((FUSE_COUNT_FILES + 1))"
    api_delete_one "trace-$RTT/"
    # libfuse -d: "unique: N, opcode: NAME (n), nodeid: ..., insize: ..., pid: ..."
    counts="$(awk '/begin-marker/ { on = 1; next } /end-marker/ { on = 0 } on && /opcode: / {
            sub(/.*opcode: /, ""); sub(/ .*/, ""); n[$0]++; total++ }
        END { for (k in n) printf "%s %d, ", k, n[k]; printf "total %d\n", total }' "$trace")"
    log "    FUSE requests for $FUSE_COUNT_FILES files: $counts"
    awk -v c="$counts" -v f="$FUSE_COUNT_FILES" 'BEGIN { sub(/.*total /, "", c); printf "%.1f", c / f }'
}

write_fs() {
    local col="$1" rows=(wbig:fs_wbig_median wsmall:fs_wsmall rmtree:fs_rmtree)
    # the tree rm -rf deletes is seeded before the mount, so that no cache
    # of the mount can have missed it
    say "seeding rmtree-$col-$RTT/ (1,000 objects) through the JSON API"
    if ! seed_rmtree "rmtree-$col-$RTT" 2>>"$LOG"; then
        fail_cells "$col" "seeding failed" rmtree
        rows=(wbig:fs_wbig_median wsmall:fs_wsmall)
    fi
    local saved=("${RCLONE_FLAGS[@]}") staging=no
    RCLONE_FLAGS=(${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes})
    # bucketfs's 256 MiB rounds each run the staging C filesystem just before
    if [[ "$col" == bucketfs ]]; then
        staged_stream_mount 2>>"$LOG" && staging=yes || log "    the staging C filesystem did not mount"
    fi
    run_group "$col" write "${rows[@]}"
    [[ "$staging" == no ]] || null_fuse_unmount
    RCLONE_FLAGS=("${saved[@]}")
    if [[ -f "$WORK/wsmall_http.$col" ]]; then
        set_cell wsmall_http "$col" "$(cat "$WORK/wsmall_http.$col")"
        rm -f "$WORK/wsmall_http.$col"
    fi
    if [[ "$col" == bucketfs ]]; then
        local paired
        for paired in wbig_paired wbig_staged_paired; do
            [[ -f "$WORK/$paired.$col" ]] || continue
            log "    rounds of $paired: $(tr '\n' ' ' <"$WORK/$paired.$col")"
            set_cell "$paired" "$col" "$(median_line <"$WORK/$paired.$col")"
            [[ -n "${CELL[$paired,$col,$(cell_at)]}" ]] || set_cell "$paired" "$col" error
            rm -f "$WORK/$paired.$col"
        done
        if [[ -f "$WORK/wbig_stage_probe.$col" ]]; then
            log "    rounds of wbig_stage_probe: $(tr '\n' ' ' <"$WORK/wbig_stage_probe.$col")"
            # curl column: a figure of the machine, as the floors are
            set_cell wbig_stage_probe curl "$(median_line <"$WORK/wbig_stage_probe.$col") ($(sort -n "$WORK/wbig_stage_probe.$col" | paste -sd ' ' | sed 's/ /, /g'))"
            rm -f "$WORK/wbig_stage_probe.$col"
        fi
        MOUNTS+=("$WORK/mnt-trace") # mounted inside the measurement's subshell
        measure wsmall_fuse bucketfs fuse_requests_per_file
    fi
}

write_notes() {
    echo "Writes (a mount of their own; rclone with ${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes}; the group's server with"
    echo "GOMAXPROCS=${BENCH_WRITE_SERVER_PROCS:-1}, BENCH_WRITE_SERVER_PROCS): \"until durable\" runs"
    echo "from the start of the command until the JSON API shows every object with its full size (polled every"
    echo "50-100 ms while not; bucketfs uploads before close returns, rclone after, by its --vfs-write-back delay,"
    echo "default 5 s), MD5 checked afterwards; every timed write starts with sync (untimed: no dirty page of earlier work"
    echo "written back in it); 256 MiB (the median of $WBIG_ROUNDS rounds, BENCH_WRITE_ROUNDS, in one mount,"
    echo "after two untimed uploads that warm the server): cp into the mount, curl one uploadType=media POST with -T;"
    echo "multipart: the same bytes behind the object's resource in one uploadType=multipart POST, chunked, as bucketfs's"
    echo "one request near the store for a file with metadata to keep (a new file of default mode goes as a media POST);"
    echo "floor: the cp on scripts/bench/null_fuse.c; side by side: that cp and curl's media POST started together, until"
    echo "both end; staged: the same cp with null_fuse writing each file to local disk too, beside curl's chunked media"
    echo "POST; staging and sending: null_fuse staging each file on local disk, a thread of it sending the staged bytes"
    echo "as they land (pread) in one chunked media POST with libcurl, close waiting for the answer, timed as bucketfs;"
    echo "paired: in each of bucketfs's rounds curl's media POST and then that staging filesystem"
    echo "run right before the cp, and the cells are the medians of the rounds' bucketfs/curl and bucketfs/staging ratios;"
    echo "new local file: bench_helper.py pwrite-new, 256 MiB in 1 MiB pwrites into a new file in the bench's directory (the"
    echo "disk of the mounts' cache dirs), then deleted, right before each of bucketfs's cps;"
    echo "300 files: one bash process writing each file with the builtin printf (no fork per file) into a directory"
    echo "made just before, curl 300 media uploads from one process (--config, \`next\`); requests per file: what the"
    echo "emulator received during the timed command, besides the durability checks; FUSE requests per file: libfuse's"
    echo "trace of the same loop over 20 files (after the loop's first, which bash writes in 64-byte pieces); rm -rf:"
    echo "1,000 objects seeded through the API before the mount, time until rm returns, nothing may be left under the"
    echo "prefix then; curl 1,000 DELETEs from one process. FUSE floor: the same bash loop on scripts/bench/null_fuse.c"
    echo "(libfuse3 low-level, names in memory, no work; the loop bucketfs uses); ceiling: 1 / (1/floor + 1/curl), what"
    echo "a mount whose close returns only once the object is durable can reach at best (it cannot overlap the two)."
}
