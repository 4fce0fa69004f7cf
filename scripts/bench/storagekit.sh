#!/usr/bin/env bash
# StorageKit beside curl on one emulator: a 256 MiB putFile (resumable, in
# 16 MiB chunks) and a 256 MiB ranged download pinned to the generation,
# each through the release `bucketfs put` / `bucketfs get --range`, and the
# same transfers with curl (one resumable session in 16 MiB chunks; one
# ranged GET). Usage: bash scripts/bench/storagekit.sh  (BENCH_SCRATCH=DIR
# builds in DIR; BENCH_BIN=PATH measures that binary).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO="$(pwd)"
bash scripts/setup.sh >/dev/null
if [[ -n "${BENCH_BIN:-}" ]]; then
    BIN="$BENCH_BIN"
else
    scratch=()
    [[ -n "${BENCH_SCRATCH:-}" ]] && scratch=(--scratch-path "$BENCH_SCRATCH")
    swift build -c release --product bucketfs "${scratch[@]}" >&2
    BIN="$(swift build -c release --show-bin-path "${scratch[@]}")/bucketfs"
fi
WORK="$(mktemp -d)"
cleanup() { bash "$REPO/scripts/emulator.sh" stop --name skbench >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
bash scripts/emulator.sh start --name skbench >&2
eval "export $(bash scripts/emulator.sh env --name skbench)"
E="$STORAGE_EMULATOR_HOST"
B=bucketfs-test
SIZE=$((256 << 20))
CHUNK=$((16 << 20))
head -c "$SIZE" /dev/urandom >"$WORK/big.bin"
now() { date +%s.%N; }
rate() { awk -v s="$1" -v e="$2" -v n="$SIZE" 'BEGIN { printf "%.0f MiB/s (%.2f s)", n / 1048576 / (e - s), e - s }'; }

# curl: resumable session, 16 MiB chunks, like StorageKit's putFile.
curl_put() {
    local loc offset end
    loc=$(curl -sS -D - -o /dev/null -X POST -H 'Content-Type: application/json' -d '{"name":"curl.bin"}' \
        "$E/upload/storage/v1/b/$B/o?uploadType=resumable&name=curl.bin" | tr -d '\r' | awk 'tolower($1)=="location:" {print $2}')
    offset=0
    while ((offset < SIZE)); do
        end=$((offset + CHUNK - 1)); ((end >= SIZE)) && end=$((SIZE - 1))
        dd if="$WORK/big.bin" bs=1M skip=$((offset >> 20)) count=$(((end - offset + 1) >> 20)) status=none |
            curl -sS -o /dev/null -X PUT -H "Content-Range: bytes $offset-$end/$SIZE" --data-binary @- "$loc"
        offset=$((end + 1))
    done
}
t0=$(now); curl_put; t1=$(now); CURL_PUT=$(rate "$t0" "$t1")
t0=$(now); "$BIN" put --endpoint "$E" --anonymous "$WORK/big.bin" "gs://$B/sk.bin" >/dev/null; t1=$(now); SK_PUT=$(rate "$t0" "$t1")
t0=$(now); curl -sS -o "$WORK/curl.out" -H "Range: bytes=0-$((SIZE - 1))" "$E/storage/v1/b/$B/o/sk.bin?alt=media"; t1=$(now); CURL_GET=$(rate "$t0" "$t1")
t0=$(now); "$BIN" get --endpoint "$E" --anonymous --range "0-$((SIZE - 1))" "gs://$B/sk.bin" "$WORK/sk.out" >/dev/null; t1=$(now); SK_GET=$(rate "$t0" "$t1")
cmp "$WORK/big.bin" "$WORK/sk.out"
cmp "$WORK/big.bin" "$WORK/curl.out"
printf '| 256 MiB | curl | StorageKit |\n|---|---|---|\n'
printf '| upload (resumable, 16 MiB chunks) | %s | %s |\n' "$CURL_PUT" "$SK_PUT"
printf '| ranged download, pinned generation | %s | %s |\n' "$CURL_GET" "$SK_GET"
