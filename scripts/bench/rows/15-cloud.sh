# shellcheck shell=bash
# Cloud-shaped rows: the server behind scripts/bench/cloud_proxy.c, which
# adds a round trip and caps every TCP connection's throughput in each
# direction, as an object store's link does (one connection gets tens of
# MiB/s; many streams per file are how clients go faster). Each shape
# ("RTT/MIB": RTT ms, MIB MiB/s per connection; BENCH_CLOUD_SHAPES, default
# "20/32 50/64") is a column group of a second table. Rows, each cell the
# median of CLOUD_ROUNDS, every mount fresh with an empty cache dir:
#   - a cold read of the 256 MiB object: curl as one stream and as 8
#     parallel 32 MiB ranged GETs (one curl, all 8 in flight at once, timed
#     until the last ends; the bytes compared afterwards, untimed); dd bs=1M
#     through the mounts (cmp untimed);
#   - the first 4 KiB of it on a fresh mount (dd bs=4k count=1, open to
#     close), and how many requests the server saw for that (from before
#     the dd until the mount has gone: a read-ahead started by it counts);
#     curl: one ranged GET of bytes 0-4095;
#   - a write of a 256 MiB file: curl as one media POST and as 8 parallel
#     32 MiB part uploads (resumable, one PUT each) followed by one compose
#     into the final object (timed until compose returns); cp into the
#     mounts, until close returns and until the JSON API shows the object
#     (MD5 checked).
# Plus the limits outside the shape, per shape (curl column): the 8 ranged
# GETs through the proxy with no cap and no delay, and straight to the
# server (the proxy must carry well over 8 x the cap, or the rows would
# measure it), and the 8 part uploads straight to the server (what the
# server itself takes in).
#
# The group runs once per run (in the first round; its round trips are its
# own), on its own server, seeded with the read group's object.

CLOUD_PARTS=8
CLOUD_PART_MIB=32 # BIG_MIB / CLOUD_PARTS
CLOUD_ROUNDS="${BENCH_CLOUD_ROUNDS:-3}"
read -r -a CLOUD_SHAPES <<<"${BENCH_CLOUD_SHAPES:-20/32 50/64}"

bench_group cloud
bench_shape_row cl_read "read a 256 MiB object, cold (MiB/s)"
bench_shape_row cl_read_parts "the same as 8 parallel 32 MiB ranged GETs (MiB/s, curl column)"
bench_shape_row cl_first "first 4 KiB of a cold 256 MiB object, fresh mount (s)" s
bench_shape_row cl_first_requests "requests the server saw for those 4 KiB"
bench_shape_row cl_write_close "write a 256 MiB file, until close returns (MiB/s)"
bench_shape_row cl_write "write a 256 MiB file, until durable (MiB/s)"
bench_shape_row cl_write_parts "the same as 8 parallel 32 MiB part uploads and one compose (MiB/s, curl column)"
bench_shape_row cl_write_parts_direct "the same straight to the server (MiB/s; the server's own limit, curl column)"
bench_shape_row cl_proxy "8 parallel 32 MiB ranged GETs through the proxy with no cap or delay (MiB/s; the proxy's own limit, curl column)"
bench_shape_row cl_direct "the same straight to the server (MiB/s, curl column)"

cloud_rtts() { echo "${RTTS[0]}"; }

cloud_seed() {
    local shape
    for shape in "${CLOUD_SHAPES[@]}"; do
        [[ "$shape" =~ ^[0-9]+/[0-9]+$ ]] || { echo "bench: BENCH_CLOUD_SHAPES: '$shape' is not RTT_MS/MIB_PER_S" >&2; return 1; }
    done
    ensure_big_object
    # the parts, one a directory (the chunk dir of scripts/bench/resumable_put.sh)
    if [[ ! -d "$WORK/big.parts" ]]; then
        local i
        mkdir -p "$WORK/big.parts"
        split -b "${CLOUD_PART_MIB}M" -d -a 1 "$WORK/big.bin" "$WORK/big.parts/part"
        for ((i = 0; i < CLOUD_PARTS; i++)); do
            mkdir "$WORK/big.parts/$i"
            mv "$WORK/big.parts/part$i" "$WORK/big.parts/$i/part"
        done
    fi
}

# cloud_shapes FUNC ARGS...: FUNC once per shape, with SHAPE, RTT and BASE
# (the server through that shape's proxy) set for it and everything it calls
cloud_shapes() {
    local SHAPE RTT BASE
    for SHAPE in "${CLOUD_SHAPES[@]}"; do
        RTT="${SHAPE%/*}"
        shaped_endpoint "$EMU_PORT" "$RTT" "${SHAPE#*/}"
        BASE="$ENDPOINT"
        settle
        "$@"
    done
}

cloud_curl() { cloud_shapes cloud_curl_shape; }
cloud_fs() { cloud_shapes cloud_fs_shape "$1"; }

# ---------------------------------------------------------------- curl

# curl_parts_get BASE: the object as CLOUD_PARTS ranged GETs from one curl
# process, all in flight at once (-Z, each on a connection of its own),
# timed until the last ends; the parts are compared with the source
# afterwards, untimed. Prints MiB/s.
curl_parts_get() {
    local base="$1" dir="$WORK/parts-get" cfg="$WORK/parts-get.cfg" part=$((CLOUD_PART_MIB << 20)) i t0 t1 ok
    rm -rf "$dir"
    mkdir -p "$dir"
    : >"$cfg"
    for ((i = 0; i < CLOUD_PARTS; i++)); do
        ((i == 0)) || echo next >>"$cfg"
        cat >>"$cfg" <<EOF
url = "$base/storage/v1/b/$BUCKET/o/${BIG_NAME//\//%2F}?alt=media"
range = "$((i * part))-$(((i + 1) * part - 1))"
output = "$dir/$i"
write-out = "%{http_code} %{size_download}\n"
EOF
    done
    t0=$(now)
    limited curl -sS -Z --parallel-immediate --parallel-max "$CLOUD_PARTS" -K "$cfg" >"$dir/codes"
    t1=$(now)
    ok="$(grep -c "^206 $part\$" "$dir/codes" || true)"
    [[ "$ok" == "$CLOUD_PARTS" ]] || { echo "curl_parts_get: $ok of $CLOUD_PARTS ranged GETs were 206 $part" >&2; return 1; }
    for ((i = 0; i < CLOUD_PARTS; i++)); do cat "$dir/$i"; done | cmp - "$WORK/big.bin" >&2 ||
        { echo "curl_parts_get: the parts differ from the object" >&2; return 1; }
    rm -rf "$dir"
    rate_mib $((BIG_MIB << 20)) "$(diff_s "$t0" "$t1")"
}

# the same through the proxy with no cap and no delay (BASE PID): also logs
# the proxy's CPU time per MiB, what it costs itself
curl_parts_get_unshaped() {
    local base="$1" pid="$2" cpu0 out
    cpu0="$(cpu_seconds_of "$pid")"
    out="$(curl_parts_get "$base")"
    awk -v s="$(seconds_between "$cpu0" "$(cpu_seconds_of "$pid")")" -v mib="$BIG_MIB" 'BEGIN {
        printf "proxy CPU: %.2f s for %d MiB, %.2f ms/MiB\n", s, mib, s * 1000 / mib }' >&2
    echo "$out"
}

curl_first_4k() { # one ranged GET of bytes 0-4095; prints seconds
    local out="$WORK/first-4k.curl" t0 t1 code
    t0=$(now)
    code="$(limited curl -sS -r 0-4095 -o "$out" -w '%{http_code}' "$BASE/storage/v1/b/$BUCKET/o/${BIG_NAME//\//%2F}?alt=media")"
    t1=$(now)
    [[ "$code" == 206 ]] || { echo "curl_first_4k: answered $code" >&2; return 1; }
    check_first_4k "$out"
    diff_s "$t0" "$t1"
}

check_first_4k() { # FILE: holds the object's first 4 KiB
    [[ "$(stat -c %s "$1")" == 4096 ]] || { echo "first 4 KiB: got $(stat -c %s "$1") bytes" >&2; return 1; }
    cmp -n 4096 "$1" "$WORK/big.bin" >&2 || { echo "first 4 KiB: the bytes differ from the object's" >&2; return 1; }
}

# The CLOUD_PARTS parts of 32 MiB uploaded side by side, each as a
# resumable upload of one request (scripts/bench/resumable_put.sh: the
# session's POST, then one PUT of the part), then one compose of them into
# the final object (JSON API: POST .../o/NAME/compose), timed until compose
# returns, which is when the object is durable (MD5 checked afterwards); the
# parts and the object are deleted, untimed. Prints the write cell.
# Resumable, not media uploads: fake-gcs-server's memory backend reads a
# media upload's body while it holds its one lock, so parallel media uploads
# arrive one after the other; a resumable upload's body is read before.
curl_parts_put() { curl_parts_put_to "$BASE"; }
curl_parts_put_to() { # BASE
    local BASE="$1" name="cloud-composed-$RTT.bin" prefix="cloud-parts-$RTT/" body="$WORK/compose.json" sources="" i r
    for ((i = 0; i < CLOUD_PARTS; i++)); do sources+="${sources:+,}{\"name\":\"$prefix$i\"}"; done
    echo "{\"sourceObjects\":[$sources],\"destination\":{\"contentType\":\"application/octet-stream\"}}" >"$body"
    # shellcheck disable=SC2016 # expanded by that bash
    r="$(durable object "$name" "$WORK/big.bin" --stdout "$WORK/compose.code" -- bash -c '
        put="$1" base="$2" bucket="$3" prefix="$4" parts="$5" n="$6" body="$7" url="$8"
        pids=()
        for ((i = 0; i < n; i++)); do
            "$put" "$base" "$bucket" "$prefix$i" "$parts/$i/part" "$parts/$i" &
            pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i" || exit 1; done
        curl -sS -X POST -H "Content-Type: application/json" --data-binary "@$body" -o /dev/null \
            -w "%{http_code}\n" "$url"' _ \
        "$REPO/scripts/bench/resumable_put.sh" "$BASE" "$BUCKET" "$prefix" "$WORK/big.parts" "$CLOUD_PARTS" \
        "$body" "$BASE/storage/v1/b/$BUCKET/o/$(urlenc "$name")/compose")"
    for ((i = 0; i < CLOUD_PARTS; i++)); do api_delete_one "$prefix$i"; done
    api_delete_one "$name"
    [[ "$(cat "$WORK/compose.code")" == 200 ]] || { echo "curl_parts_put: compose answered $(cat "$WORK/compose.code")" >&2; return 1; }
    cell_big "$r"
}

# measure_rounds ROW COLUMN FUNC ARGS...: CLOUD_ROUNDS measurements, the
# median kept
measure_rounds() {
    local row="$1" col="$2" round
    shift 2
    for round in $(seq 1 "$CLOUD_ROUNDS"); do
        measure "$row" "$col" "$@"
        keep_round "$row" "$col"
    done
    median_cell "$row" "$col"
}

cloud_curl_shape() {
    local round before
    say "cloud at $(at_label): curl"
    shaped_endpoint "$EMU_PORT" 0 0
    # the proxy alone and the server alone, in turns
    for round in $(seq 1 "$CLOUD_ROUNDS"); do
        measure cl_proxy curl curl_parts_get_unshaped "$ENDPOINT" "$PROXY_PID"
        keep_round cl_proxy curl
        measure cl_direct curl curl_parts_get "$EMU_BASE"
        keep_round cl_direct curl
    done
    median_cell cl_proxy curl
    median_cell cl_direct curl
    measure_rounds cl_read curl curl_seq
    measure_rounds cl_read_parts curl curl_parts_get "$BASE"
    for round in $(seq 1 "$CLOUD_ROUNDS"); do
        before="$(request_count)"
        measure cl_first curl curl_first_4k
        keep_round cl_first curl
        note_first_requests curl "$before"
    done
    median_cell cl_first curl
    median_cell cl_first_requests curl
    measure_rounds cl_write curl curl_wbig
    measure_rounds cl_write_parts curl curl_parts_put
    measure_rounds cl_write_parts_direct curl curl_parts_put_to "$EMU_BASE"
    note_proxy_margin
}

# says in the log and on stderr how far above 8 x the cap the proxy's own
# limit is (the rows measure the shape only while it is well above)
note_proxy_margin() {
    local open="${CELL[cl_proxy,curl,$SHAPE]:-}" cap="${SHAPE#*/}"
    [[ "$open" =~ ^[0-9]+$ ]] || return 0
    say "proxy check at $(at_label): $open MiB/s through it uncapped," \
        "$(awk -v o="$open" -v c="$cap" -v n="$CLOUD_PARTS" 'BEGIN { printf "%.1f", o / (n * c) }')x" \
        "the $((CLOUD_PARTS * cap)) MiB/s of $CLOUD_PARTS capped connections"
}

# note_first_requests COLUMN BEFORE: the requests the server saw since
# BEFORE become a round of the requests row (error if the 4 KiB read failed)
note_first_requests() {
    local col="$1" before="$2"
    if [[ "${CELL[cl_first,$col,$SHAPE]:-error}" == error ]]; then
        set_cell cl_first_requests "$col" error
    else
        set_cell cl_first_requests "$col" "$(requests_since "$before")"
        log "    requests for the first 4 KiB ($col): $(request_summary "$before"):"
        server_requests | tail -n +"$((before + 1))" | sed 's/^/        /' >>"$LOG"
    fi
    keep_round cl_first_requests "$col"
}

# ---------------------------------------------------------------- mounts

fs_first_4k() { # MP: dd of the first 4 KiB, open to close; prints seconds
    local mp="$1" out="$WORK/first-4k.$CUR_COL" t0 t1
    t0=$(now)
    limited dd if="$mp/$BIG_NAME" of="$out" bs=4k count=1 status=none
    t1=$(now)
    check_first_4k "$out"
    diff_s "$t0" "$t1"
}

# cp into the mount, timed until cp returns (close) and until the JSON API
# shows the object; prints the durable cell and leaves the close cell in
# $WORK/write-close.COLUMN
fs_cloud_write() { # MP
    local mp="$1" name="cloud-written-$CUR_COL-$RTT.bin" r
    r="$(durable object "$name" "$WORK/big.bin" --wait -- cp "$WORK/big.bin" "$mp/$name")"
    api_delete_one "$name"
    cell_big "$(awk '{ print $2 }' <<<"$r")" >"$WORK/write-close.$CUR_COL"
    cell_big "$r"
}

# cloud_mount COLUMN NAME: a fresh mount with an empty cache dir (fails the
# given rows if it cannot); NAME is made unique per shape
cloud_mount() {
    local col="$1" name="$2-${SHAPE/\//-}"
    shift 2
    say "$col at $(at_label): mount for '$name'"
    mount_column "$col" "$name" && return 0
    fail_cells "$col" "mount failed" "$@"
    unmount_current
    return 1
}

cloud_fs_shape() {
    local col="$1" round row before saved=("${RCLONE_FLAGS[@]}")
    for round in $(seq 1 "$CLOUD_ROUNDS"); do
        before=0
        if cloud_mount "$col" "cloud-first$round" cl_first; then
            before="$(request_count)"
            measure cl_first "$col" fs_first_4k "$CUR_MP"
            unmount_current
            # a read-ahead the dd started ends with the mount at the latest
            sleep 0.2
        fi
        keep_round cl_first "$col"
        note_first_requests "$col" "$before"
        if cloud_mount "$col" "cloud-read$round" cl_read; then
            measure cl_read "$col" fs_seq "$CUR_MP"
            unmount_current
        fi
        keep_round cl_read "$col"
        RCLONE_FLAGS=(${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes})
        rm -f "$WORK/write-close.$col"
        if cloud_mount "$col" "cloud-write$round" cl_write cl_write_close; then
            measure cl_write "$col" fs_cloud_write "$CUR_MP"
            unmount_current
        fi
        RCLONE_FLAGS=("${saved[@]}")
        if [[ -s "$WORK/write-close.$col" && "${CELL[cl_write,$col,$SHAPE]}" != error ]]; then
            set_cell cl_write_close "$col" "$(cat "$WORK/write-close.$col")"
        else
            set_cell cl_write_close "$col" error
        fi
        keep_round cl_write "$col"
        keep_round cl_write_close "$col"
    done
    for row in cl_first cl_first_requests cl_read cl_write cl_write_close; do median_cell "$row" "$col"; done
}

cloud_notes() {
    echo "Cloud rows (second table): the server behind scripts/bench/cloud_proxy.c, a round trip of RTT ms and a cap of"
    echo "MIB MiB/s on each TCP connection in each direction (a token bucket per connection, chunks delivered half a"
    echo "round trip late each way, one round trip per new connection). Each cell is the median of $CLOUD_ROUNDS rounds, every"
    echo "mount fresh with an empty cache dir. Cold read: dd bs=1M (cmp untimed); curl one GET, and 8 parallel 32 MiB"
    echo "ranged GETs from one curl (-Z, all in flight at once, timed until the last ends, bytes compared untimed). First"
    echo "4 KiB: dd bs=4k count=1 on a fresh mount, open to close; requests: what the server saw from before the dd until"
    echo "the mount was gone; curl one ranged GET. Write: cp into the mount (rclone with"
    echo "${BENCH_RCLONE_WRITE_FLAGS:---vfs-cache-mode writes}) until close returns and until the JSON API shows the object (MD5"
    echo "checked); curl one media POST, and 8 parallel 32 MiB part uploads (resumable, one PUT each: fake-gcs-server"
    echo "reads media uploads one at a time) then one compose, timed until compose returns."
    echo "The limits outside the shape: the 8 ranged GETs through the proxy with no cap and no delay, beside the same"
    echo "straight to the server, and the 8 part uploads straight to the server; a shaped row measures the shape only"
    echo "while these are well above what it asks for (8 x the cap for 8 streams)."
    local shape open
    for shape in "${CLOUD_SHAPES[@]}"; do
        open="${CELL[cl_proxy,curl,$shape]:-}"
        [[ "$open" =~ ^[0-9]+$ ]] || continue
        if ((open * 2 < 3 * CLOUD_PARTS * ${shape#*/})); then
            echo "At $(shape_label "$shape") the proxy carried $open MiB/s uncapped, less than 1.5 x the $((CLOUD_PARTS * ${shape#*/})) MiB/s"
            echo "of $CLOUD_PARTS capped streams: there the rows of 8 streams measure this machine, not the shape."
        fi
    done
}
