# shellcheck shell=bash
# Firebase v0 rows (issue 10's scripts/bench/firebase_ls.sh, run once): ls -l
# of 1,000 objects over the JSON API and over Firebase's v0 API as a signed-in
# user, on Tests/Servers/firebase_emulator.py, each the median of three cold
# runs. Its 20 ms is held by that server before each request (its
# /_latency), not by the delay proxy; the 0 ms and 20 ms cells of a row are
# its two measurements. rclone has no Firebase backend.

bench_group firebase
bench_row fb_json "ls -l of 1,000 objects, cold, JSON API, Firebase emulator (s)"
bench_row fb_v0 "ls -l of 1,000 objects, cold, Firebase v0 as a user (s)"

firebase_rtts() { echo 0; }

firebase_curl() {
    local out="$WORK/firebase.rows" line rtt key curl fs
    if [[ ! -x "$REPO/scripts/bench/firebase_ls.sh" && ! -f "$REPO/scripts/bench/firebase_ls.sh" ]]; then
        fail_cells curl "no scripts/bench/firebase_ls.sh" fb_json fb_v0
        return 0
    fi
    say "firebase: scripts/bench/firebase_ls.sh (both round-trip times; details in .build/bench/firebase.log)"
    if ! BENCH_BIN="$BIN" BENCH_FIREBASE_WIDTHS="${BENCH_FIREBASE_WIDTHS:-16}" limited bash "$REPO/scripts/bench/firebase_ls.sh" >"$out" 2>>"$LOG"; then
        fail_cells curl "firebase_ls.sh failed" fb_json fb_v0
        fail_cells bucketfs "firebase_ls.sh failed" fb_json fb_v0
        return 0
    fi
    cat "$out" >>"$LOG"
    # "| ls -l of 1,000 objects, cold, R ms round trip, API (s) | curl | bucketfs | — |"
    while IFS= read -r line; do
        [[ "$line" =~ ^\|\ ls\ -l\ of\ 1,000\ objects,\ cold,\ ([0-9]+)\ ms\ round\ trip,\ (JSON\ API|Firebase\ v0)[^|]*\|\ *([^ |]+)\ *\|\ *([^ |]+)\ *\| ]] || continue
        rtt="${BASH_REMATCH[1]}"
        key=fb_json
        [[ "${BASH_REMATCH[2]}" == "JSON API" ]] || key=fb_v0
        curl="${BASH_REMATCH[3]}"
        fs="${BASH_REMATCH[4]}"
        CELL[$key,curl,$rtt]="$curl"
        CELL[$key,bucketfs,$rtt]="$fs"
        printf '    %-8s %4s ms  %-52s %s / %s\n' "curl/fs" "$rtt" "${LABEL[$key]}" "$curl" "$fs" >&2
    done <"$out"
}

firebase_fs() { :; }

firebase_notes() {
    echo "Firebase rows: scripts/bench/firebase_ls.sh, median of three cold runs on"
    echo "Tests/Servers/firebase_emulator.py; its 20 ms is held by that server before each request, not by the delay"
    echo "proxy. A v0 listing names its objects only, so the mount stats each one (16 at a time)."
}
