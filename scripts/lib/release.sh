# shellcheck shell=bash
# Shared by the scripts that measure the release binary (scripts/bench.sh,
# scripts/bench/instructions.sh). Source it; it defines functions only.

# release_binary: sets BIN to the bucketfs binary to measure, and BIN_KIND
# to what it is: BENCH_BIN if set ("binary PATH"), else the product of
# `swift build -c release --product bucketfs` (in BENCH_SCRATCH if set;
# "release build"). Fails if there is no executable there.
release_binary() {
    if [[ -n "${BENCH_BIN:-}" ]]; then
        echo "==> using BENCH_BIN=$BENCH_BIN (no build)" >&2
        BIN="$BENCH_BIN"
        BIN_KIND="binary $BENCH_BIN"
    else
        local scratch=()
        [[ -z "${BENCH_SCRATCH:-}" ]] || scratch=(--scratch-path "$BENCH_SCRATCH")
        echo "==> building bucketfs (release)" >&2
        swift build -c release --product bucketfs "${scratch[@]}"
        BIN="$(swift build -c release --show-bin-path "${scratch[@]}")/bucketfs"
        BIN_KIND="release build"
    fi
    BIN="$(readlink -f "$BIN")"
    [[ -x "$BIN" ]] || { echo "no bucketfs binary at $BIN" >&2; return 1; }
}
