#!/usr/bin/env bash
# The test command (README): bash scripts/test.sh [swift test args, e.g. --filter X]
#
# 1. scripts/setup.sh (Debian packages, .build/venv with the pinned servers);
# 2. starts the wrapped GCS emulator (scripts/emulator.sh, in memory, bucket
#    bucketfs-test), Tests/Servers/fake_gcs.py and
#    Tests/Servers/firebase_emulator.py, each on a free loopback port;
# 3. exports for the tests:
#      BUCKETFS_TEST_EMULATOR=http://127.0.0.1:PORT   (emulator)
#      BUCKETFS_TEST_FAKE_GCS=http://127.0.0.1:PORT2  (fake_gcs.py)
#      BUCKETFS_TEST_FIREBASE=http://127.0.0.1:PORT3  (firebase_emulator.py:
#        Storage v0, Auth, rules; API key fake-api-key, project demo-bucketfs)
#      BUCKETFS_TEST_FAKE_GCS_SERVER=http://127.0.0.1:PORT4  (fake-gcs-server,
#        the independent Go emulator, scripts/fake_gcs_server.sh; in memory,
#        bucket bucketfs-test created)
#      BUCKETFS_TEST_PYTHON=<repo>/.build/venv/bin/python
#      BUCKETFS_TEST_REPO=<repo>
# 4. swift build --build-tests, then swift test "$@"; exits with swift
#    test's status. On any exit the servers are stopped (by their saved PIDs) and
#    every mountpoint listed in .build/servers/mounts (one per line, written
#    by tests) is lazily unmounted.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"
SERVERS="$REPO/.build/servers"
# shellcheck source=scripts/lib/processes.sh
source "$REPO/scripts/lib/processes.sh"
MOUNTS="$SERVERS/mounts"
PY="$REPO/.build/venv/bin/python"

say() { printf '==> %s\n' "$*"; }

unmount_listed() {
    [[ -f "$MOUNTS" ]] || return 0
    local mp
    while IFS= read -r mp; do
        [[ -n "$mp" ]] || continue
        fusermount3 -uz "$mp" >/dev/null 2>&1 || true
    done <"$MOUNTS"
    rm -f "$MOUNTS"
}

# Our own servers (Tests/Servers/NAME.py), each with a directory
# .build/servers/NAME holding pid, port, stdout and stderr.
server_pid() { saved_pid "$SERVERS/$1/pid" "$1.py"; }

stop_server() {
    local pid
    if pid="$(server_pid "$1")"; then stop_pid "$pid"; fi
    rm -f "$SERVERS/$1/pid" "$SERVERS/$1/port"
}

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
    local status=$?
    set +e
    unmount_listed
    stop_server fake_gcs
    stop_server firebase_emulator
    bash "$REPO/scripts/emulator.sh" stop --name emulator
    bash "$REPO/scripts/fake_gcs_server.sh" stop
    exit "$status"
}

# start_server NAME [ARGS...]: runs Tests/Servers/NAME.py on a free port and
# waits for its READY line.
start_server() {
    local name="$1" dir="$SERVERS/$1"
    shift
    mkdir -p "$dir"
    rm -f "$dir/stdout" "$dir/stderr"
    "$PY" "$REPO/Tests/Servers/$name.py" --host 127.0.0.1 --port 0 "$@" \
        >"$dir/stdout" 2>"$dir/stderr" </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pid"
    local deadline=$((SECONDS + 20)) port=""
    while true; do
        port="$(sed -n 's/^READY \([0-9][0-9]*\)$/\1/p' "$dir/stdout" 2>/dev/null || true)"
        [[ -n "$port" ]] && break
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
            echo "test.sh: $name.py did not become READY; stderr:" >&2
            cat "$dir/stderr" >&2 || true
            exit 1
        fi
        sleep 0.05
    done
    echo "$port" >"$dir/port"
}

say "setup (scripts/setup.sh)"
bash "$REPO/scripts/setup.sh"

# Leftovers of an interrupted run.
unmount_listed
stop_server fake_gcs
stop_server firebase_emulator
bash "$REPO/scripts/emulator.sh" stop --name emulator
bash "$REPO/scripts/fake_gcs_server.sh" stop

trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting GCS emulator (scripts/emulator.sh), fake-gcs-server (scripts/fake_gcs_server.sh), fake GCS and Firebase servers (Tests/Servers/)"
bash "$REPO/scripts/emulator.sh" start --name emulator
bash "$REPO/scripts/fake_gcs_server.sh" start
start_server fake_gcs
start_server firebase_emulator

BUCKETFS_TEST_EMULATOR="http://127.0.0.1:$(cat "$SERVERS/emulator/port")"
BUCKETFS_TEST_FAKE_GCS="http://127.0.0.1:$(cat "$SERVERS/fake_gcs/port")"
BUCKETFS_TEST_FIREBASE="http://127.0.0.1:$(cat "$SERVERS/firebase_emulator/port")"
BUCKETFS_TEST_FAKE_GCS_SERVER="http://127.0.0.1:$(cat "$SERVERS/fake_gcs_server/port")"
export BUCKETFS_TEST_EMULATOR BUCKETFS_TEST_FAKE_GCS BUCKETFS_TEST_FIREBASE BUCKETFS_TEST_FAKE_GCS_SERVER
export BUCKETFS_TEST_PYTHON="$PY"
# Code that falls through the Application Default Credentials order with
# the process's own environment must never look up metadata.google.internal
# from a test: traffic stays on loopback. (Tests of that order pass their
# own environment.)
export NO_GCE_CHECK=true
export BUCKETFS_TEST_REPO="$REPO"
say "BUCKETFS_TEST_EMULATOR=$BUCKETFS_TEST_EMULATOR"
say "BUCKETFS_TEST_FAKE_GCS=$BUCKETFS_TEST_FAKE_GCS"
say "BUCKETFS_TEST_FIREBASE=$BUCKETFS_TEST_FIREBASE"
say "BUCKETFS_TEST_FAKE_GCS_SERVER=$BUCKETFS_TEST_FAKE_GCS_SERVER"

say "swift build --build-tests"
swift build --build-tests

say "swift test $*"
status=0
swift test "$@" || status=$?
say "swift test exited with $status"
exit "$status"
