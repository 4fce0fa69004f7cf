# shellcheck shell=bash
# The write workloads of scripts/bench.sh (sourced by it; uses its globals:
# BASE BUCKET BIG_MIB WORK ($WORK/big.bin, $WORK/small.txt) PY HELPER
# WORKLOAD_TIMEOUT CUR_COL and `limited`).
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
# shellcheck disable=SC2034 # used by bench.sh (seed)
SMALL_SIZE=4096
RMTREE_FILES=1000 # 10 directories x 100 files (bench_helper.py RMTREE_SHAPE)
DURABLE="$REPO/scripts/bench/until_durable.py"

# durable CHECK... [--wait] [--stdout FILE] -- CMD...: until_durable.py with
# the workload time limit (its own deadline a little earlier, so that it can
# say what it saw)
durable() {
    local deadline=$((WORKLOAD_TIMEOUT > 10 ? WORKLOAD_TIMEOUT - 5 : WORKLOAD_TIMEOUT))
    limited "$PY" "$DURABLE" "$BASE" "$BUCKET" --deadline "$deadline" "$@"
}

urlenc() { "$PY" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }

# api_delete KIND...: deletes the objects of the bench_helper.py KINDs (one
# curl process); a name that is already gone is fine
api_delete() {
    "$PY" "$HELPER" delete-config "$BASE" "$BUCKET" "$@" >"$WORK/cleanup.cfg"
    curl -K "$WORK/cleanup.cfg" >"$WORK/cleanup.codes"
    if grep -qv -e '^20[04]$' -e '^404$' "$WORK/cleanup.codes"; then
        echo "api_delete $*: $(sort "$WORK/cleanup.codes" | uniq -c | tr '\n' ' ')" >&2
        return 1
    fi
}

api_delete_one() { # NAME
    local code
    code="$(curl -sS -o /dev/null -w '%{http_code}' -X DELETE "$BASE/storage/v1/b/$BUCKET/o/$(urlenc "$1")")"
    [[ "$code" == 200 || "$code" == 204 || "$code" == 404 ]] || { echo "delete $1: $code" >&2; return 1; }
}

# seed_rmtree PREFIX: the 1,000 objects rm -rf will delete, uploaded with curl
seed_rmtree() {
    local ok
    "$PY" "$HELPER" upload-config "$BASE" "$BUCKET" "rmtree:$1" >"$WORK/rmtree-seed.cfg"
    curl -K "$WORK/rmtree-seed.cfg" >"$WORK/rmtree-seed.codes"
    ok="$(grep -c '^200$' "$WORK/rmtree-seed.codes" || true)"
    [[ "$ok" == "$RMTREE_FILES" ]] || { echo "seed_rmtree $1: $ok of $RMTREE_FILES uploads succeeded" >&2; return 1; }
}

# cells: "MiB/s (seconds)", "files/s (seconds)"; the argument is what
# until_durable.py printed (TOTAL CMD LOOKS)
cell_big() { awk -v n=$((BIG_MIB << 20)) '{ if ($1 <= 0) exit 1; printf "%.0f (%.2f s)", n / 1048576 / $1, $1 }' <<<"$1"; }
cell_small() { awk -v n="$SMALL_COUNT" '{ if ($1 <= 0) exit 1; printf "%.0f (%.2f s)", n / $1, $1 }' <<<"$1"; }

# ---------------------------------------------------------------- curl

# one media upload (uploadType=media, -T streams the file with a
# Content-Length; "Expect:" off, as bucketfs's Transport does)
curl_wbig() {
    local name="$WBIG_NAME_PREFIX-curl.bin" r
    r="$(durable object "$name" "$WORK/big.bin" --wait -- \
        curl -sS --fail -X POST -T "$WORK/big.bin" -H 'Expect:' -H 'Content-Type: application/octet-stream' \
        -o /dev/null "$BASE/upload/storage/v1/b/$BUCKET/o?uploadType=media&name=$(urlenc "$name")")"
    api_delete_one "$name"
    cell_big "$r"
}

# 300 media uploads, sequential, in ONE curl process (curl --config, one
# block per file separated by `next`, one kept-alive connection)
curl_wsmall() {
    local prefix="small-curl/" r ok
    "$PY" "$HELPER" files-config "$BASE" "$BUCKET" "$prefix" "$SMALL_COUNT" "$WORK/small.txt" >"$WORK/files.cfg"
    r="$(durable objects "$prefix" "$SMALL_COUNT" "$WORK/small.txt" --wait --stdout "$WORK/files.codes" -- \
        curl -K "$WORK/files.cfg")"
    ok="$(grep -c '^200$' "$WORK/files.codes" || true)"
    [[ "$ok" == "$SMALL_COUNT" ]] || { echo "curl_wsmall: $ok of $SMALL_COUNT uploads answered 200" >&2; return 1; }
    api_delete "files:$prefix:$SMALL_COUNT"
    cell_small "$r"
}

# 1,000 DELETEs, sequential, in ONE curl process (curl --config)
curl_rmtree() {
    local prefix="rmtree-curl" r ok
    seed_rmtree "$prefix"
    "$PY" "$HELPER" delete-config "$BASE" "$BUCKET" "rmtree:$prefix" >"$WORK/rmtree.cfg"
    r="$(durable none "$prefix/" --stdout "$WORK/rmtree.codes" -- curl -K "$WORK/rmtree.cfg")"
    ok="$(grep -c -e '^200$' -e '^204$' "$WORK/rmtree.codes" || true)"
    [[ "$ok" == "$RMTREE_FILES" ]] || { echo "curl_rmtree: $ok of $RMTREE_FILES DELETEs answered 200/204" >&2; return 1; }
    awk '{ printf "%.2f", $2 }' <<<"$r"
}

# ---------------------------------------------------------------- mounts

fs_wbig() { # MP: cp of the 256 MiB file into the mount's root
    local mp="$1" name="$WBIG_NAME_PREFIX-$CUR_COL.bin" r
    r="$(durable object "$name" "$WORK/big.bin" --wait -- cp "$WORK/big.bin" "$mp/$name")"
    api_delete_one "$name"
    cell_big "$r"
}

# 300 files of 4 KiB into a directory made just before (mkdir untimed), by
# one bash process with builtins only (printf of a variable holding the 4 KiB
# into each file), so that no fork per file is timed
fs_wsmall() { # MP
    local mp="$1" dir="small-$CUR_COL" r
    mkdir "$mp/$dir"
    # shellcheck disable=SC2016 # expanded by the inner bash
    r="$(durable objects "$dir/" "$SMALL_COUNT" "$WORK/small.txt" --wait -- bash -c '
        data="$(<"$1")"
        for ((i = 0; i < $3; i++)); do
            printf -v name "%s/f%03d" "$2" "$i"
            printf "%s" "$data" >"$name"
        done' _ "$WORK/small.txt" "$mp/$dir" "$SMALL_COUNT")"
    api_delete "files:$dir/:$SMALL_COUNT"
    api_delete_one "$dir/" # bucketfs's mkdir placeholder, if any
    cell_small "$r"
}

# rm -rf of the tree seeded (through the API, before this mount) as
# rmtree-COLUMN; the time until rm returns, and nothing may be left under
# the prefix at that moment
fs_rmtree() { # MP
    local mp="$1" prefix="rmtree-$CUR_COL" r
    r="$(durable none "$prefix/" -- rm -rf "$mp/$prefix")"
    awk '{ printf "%.2f", $2 }' <<<"$r"
}
