#!/usr/bin/env bash
# The Firebase rows of the benchmark: bash scripts/bench/firebase_ls.sh
#
# `ls -l` of 1,000 objects, cold, on one loopback server
# (Tests/Servers/firebase_emulator.py, which serves both APIs from one
# store), at 0 ms and at 20 ms per request (the server's /_latency: every
# request waits that long before it is handled, as a round trip to a
# distant server would), through:
#   the JSON API   bucketfs mounted anonymously (the server's admin view);
#                  curl: the one listing request (items carry metadata);
#   Firebase v0    bucketfs signed in as a user (the rules allow that
#                  user's folder); v0 listings carry names only, so the mount
#                  stats every object, --listing-stat-width at a time
#                  (default 16); curl: the listing plus one metadata GET per
#                  object, 16 in parallel (`curl --parallel`), the server's
#                  limit for the same requests.
# rclone has no Firebase v0 backend: its cells are "—".
#
# Each cell is the median of BENCH_FIREBASE_RUNS (default 3) cold runs (a
# fresh mount and cache directory each). Also measured, to justify the
# default width: the v0 mount at widths BENCH_FIREBASE_WIDTHS (default
# "1 4 16 64"), and curl's metadata GETs one after another.
#
# Prints the table rows (the format of docs/performance.md's tables) on stdout, the details to
# .build/bench/firebase.log. BENCH_BIN=PATH measures that binary instead of
# building `swift build -c release --product bucketfs` (BENCH_SCRATCH=DIR
# adds --scratch-path DIR). On exit every mount made here is lazily
# unmounted and the server (started here, on a free port) is stopped by its
# PID.
set -euo pipefail

cd "$(dirname "$0")/../.."
REPO="$(pwd)"
PY="$REPO/.build/venv/bin/python"
OUT_DIR="$REPO/.build/bench"
LOG="$OUT_DIR/firebase.log"
COUNT=1000
RUNS="${BENCH_FIREBASE_RUNS:-3}"
WIDTHS="${BENCH_FIREBASE_WIDTHS:-1 4 16 64}"
API_KEY=fake-api-key
BUCKET=bench-firebase

WORK=""
SERVER_PID=""
MOUNTS=()

say() { printf '==> %s\n' "$*" | tee -a "$LOG" >&2; }
now() { date +%s.%N; }
diff_s() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { printf "%s", v[int((NR + 1) / 2)] }'; }

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
    local rc=$? mp
    trap - EXIT INT TERM
    for mp in "${MOUNTS[@]}"; do
        if awk -v mp="$mp" '$5 == mp { found = 1 } END { exit !found }' /proc/self/mountinfo; then
            fusermount3 -uz "$mp" >/dev/null 2>&1 || true
        fi
    done
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    [[ -n "$WORK" ]] && rm -rf "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT_DIR"
: >"$LOG"
WORK="$(mktemp -d /tmp/bucketfs-bench-firebase-XXXXXX)"

bash "$REPO/scripts/setup.sh" >>"$LOG" 2>&1
if [[ -n "${BENCH_BIN:-}" ]]; then
    BIN="$BENCH_BIN"
else
    SCRATCH=()
    [[ -n "${BENCH_SCRATCH:-}" ]] && SCRATCH=(--scratch-path "$BENCH_SCRATCH")
    say "building the release binary"
    swift build -c release --product bucketfs "${SCRATCH[@]}" >>"$LOG" 2>&1
    BIN="$(swift build -c release "${SCRATCH[@]}" --show-bin-path)/bucketfs"
fi
say "load before the run: $(uptime)"

# ---------------------------------------------------------------- server, user, objects

"$PY" "$REPO/Tests/Servers/firebase_emulator.py" --host 127.0.0.1 --port 0 --api-key "$API_KEY" \
    >"$WORK/server.out" 2>"$WORK/server.err" </dev/null &
SERVER_PID=$!
for _ in $(seq 1 200); do
    PORT="$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$WORK/server.out")"
    [[ -n "$PORT" ]] && break
    sleep 0.05
done
[[ -n "${PORT:-}" ]] || { echo "firebase_emulator.py did not start: $(cat "$WORK/server.err")" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"

EMAIL=bench@example.com
printf 'bench-password\n' >"$WORK/password"
curl -sS --fail -X POST -H 'Content-Type: application/json' \
    -d "{\"email\":\"$EMAIL\",\"password\":\"bench-password\",\"returnSecureToken\":true}" \
    "$BASE/identitytoolkit.googleapis.com/v1/accounts:signUp?key=$API_KEY" >"$WORK/user.json"
USER_ID="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["localId"])' "$WORK/user.json")"
ID_TOKEN="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["idToken"])' "$WORK/user.json")"
DIR="users/$USER_ID/dir$COUNT"
ENC_DIR="${DIR//\//%2F}"

say "seeding $COUNT objects in gs://$BUCKET/$DIR"
for i in $(seq -w 0 $((COUNT - 1))); do
    [[ "$i" == 0* && "$i" =~ ^0+$ ]] || echo next
    printf 'url = "%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s%%2Ffile-%s.txt"\n' "$BASE" "$BUCKET" "$ENC_DIR" "$i"
    printf 'data = "%s"\nrequest = "POST"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\n' "object $i"
done >"$WORK/seed.cfg"
curl -sS -K "$WORK/seed.cfg" >"$WORK/seed.codes"
[[ "$(grep -c '^200$' "$WORK/seed.codes")" == "$COUNT" ]] || { echo "seeding failed" >&2; exit 1; }

# ---------------------------------------------------------------- curl

curl_json() { # the JSON API listing: one request; prints seconds
    local t0 t1
    t0=$(now)
    curl -sS --fail -o "$WORK/json-list.json" "$BASE/storage/v1/b/$BUCKET/o?prefix=$ENC_DIR%2F&delimiter=%2F&maxResults=1000"
    t1=$(now)
    [[ "$(grep -o '"size"' "$WORK/json-list.json" | wc -l)" == "$COUNT" ]] || { echo "curl_json: wrong item count" >&2; return 1; }
    diff_s "$t0" "$t1"
}

curl_v0() { # PARALLEL: the v0 listing, then one metadata GET per object; prints seconds
    local parallel="$1" t0 t1 ok args=()
    ((parallel > 1)) && args=(--parallel --parallel-max "$parallel")
    t0=$(now)
    curl -sS --fail -H "Authorization: Firebase $ID_TOKEN" -o "$WORK/v0-list.json" \
        "$BASE/v0/b/$BUCKET/o?prefix=$ENC_DIR%2F&delimiter=%2F&maxResults=1000"
    "$PY" -c '
import json, sys
print("next\n".join(
    "url = \"%s/v0/b/%s/o/%s\"\nheader = \"Authorization: Firebase %s\"\noutput = \"/dev/null\"\n"
    "write-out = \"%%{http_code}\\n\"\n" % (sys.argv[2], sys.argv[3], item["name"].replace("/", "%2F"), sys.argv[4])
    for item in json.load(open(sys.argv[1]))["items"]), end="")
' "$WORK/v0-list.json" "$BASE" "$BUCKET" "$ID_TOKEN" >"$WORK/v0-stat.cfg"
    # Options given before -K apply to its first URL only: each entry
    # carries its own header. --parallel draws a progress meter on stderr.
    curl -sS "${args[@]}" -K "$WORK/v0-stat.cfg" >"$WORK/v0-stat.codes" 2>>"$LOG"
    t1=$(now)
    ok="$(grep -c '^200$' "$WORK/v0-stat.codes" || true)"
    [[ "$ok" == "$COUNT" ]] || { echo "curl_v0: $ok of $COUNT metadata GETs answered 200" >&2; return 1; }
    diff_s "$t0" "$t1"
}

# ---------------------------------------------------------------- bucketfs

fs_ls() { # MODE (json|v0) WIDTH: mounts fresh, times ls -l of the directory, unmounts; prints seconds
    local mode="$1" width="$2" mp cache t0 t1 lines credentials
    mp="$(mktemp -d "$WORK/mnt-XXXXXX")"
    cache="$(mktemp -d "$WORK/cache-XXXXXX")"
    if [[ "$mode" == v0 ]]; then
        credentials=(--firebase-api-key "$API_KEY" --firebase-email "$EMAIL" --firebase-password-file "$WORK/password"
            --firebase-auth-emulator "127.0.0.1:$PORT" --listing-stat-width "$width")
    else
        credentials=(--anonymous)
    fi
    MOUNTS+=("$mp")
    "$BIN" mount --endpoint "$BASE" "${credentials[@]}" "gs://$BUCKET" "$mp" --cache-dir "$cache" \
        --log-file "$WORK/mount.log" >>"$LOG" 2>&1
    t0=$(now)
    ls -l "$mp/$DIR" >"$WORK/ls.out"
    t1=$(now)
    "$BIN" unmount "$mp" >>"$LOG" 2>&1 || fusermount3 -uz "$mp"
    lines="$(grep -c '^-' "$WORK/ls.out" || true)"
    [[ "$lines" == "$COUNT" ]] || { echo "fs_ls $mode: $lines files listed, want $COUNT" >&2; return 1; }
    diff_s "$t0" "$t1"
}

runs() { # COMMAND...: the median of RUNS runs
    local values="" i
    for ((i = 0; i < RUNS; i++)); do
        values+=" $("$@")"
    done
    echo "$*:$values" >>"$LOG"
    echo "$values" | median
}

latency() { # MS: every request waits MS before the server handles it
    curl -sS --fail -o /dev/null -X POST -H 'Content-Type: application/json' -d "{\"ms\": $1}" "$BASE/_latency"
}

declare -A CELL=()
for ms in 0 20; do
    latency "$ms"
    say "measuring at $ms ms per request ($RUNS cold runs each)"
    CELL[curl_json_$ms]="$(runs curl_json)"
    CELL[curl_v0_$ms]="$(runs curl_v0 16)"
    CELL[curl_v0_seq_$ms]="$(runs curl_v0 1)"
    CELL[fs_json_$ms]="$(runs fs_ls json 0)"
    for width in $WIDTHS; do
        CELL[fs_v0_${width}_$ms]="$(runs fs_ls v0 "$width")"
    done
done
say "load after the run: $(uptime)"

for ms in 0 20; do
    printf '| ls -l of 1,000 objects, cold, %s ms round trip, JSON API (s) | %s | %s | — |\n' \
        "$ms" "${CELL[curl_json_$ms]}" "${CELL[fs_json_$ms]}"
    printf '| ls -l of 1,000 objects, cold, %s ms round trip, Firebase v0 as a user (s) | %s | %s | — |\n' \
        "$ms" "${CELL[curl_v0_$ms]}" "${CELL[fs_v0_16_$ms]:-n/a}"
done
echo
echo "Firebase v0, ls -l of 1,000 objects, cold (s), by --listing-stat-width (0 ms / 20 ms round trip):"
for width in $WIDTHS; do
    printf '  width %-3s %s / %s\n' "$width" "${CELL[fs_v0_${width}_0]}" "${CELL[fs_v0_${width}_20]}"
done
printf '  curl, 1 list + 1,000 metadata GETs one after another: %s / %s\n' "${CELL[curl_v0_seq_0]}" "${CELL[curl_v0_seq_20]}"
