#!/usr/bin/env bash
# Starts/stops the (wrapped) GCS emulator on a free loopback port.
#
#   scripts/emulator.sh start [--name NAME]   start it in the background
#   scripts/emulator.sh stop  [--name NAME]   stop it (by its saved PID only)
#   scripts/emulator.sh env   [--name NAME]   print STORAGE_EMULATOR_HOST=...
#
# State lives in .build/servers/NAME/ (default NAME: emulator): pid, port,
# requests.log (one "METHOD<TAB>PATH<TAB>QUERY" line per request), and
# stdout/stderr of the server. The server is scripts/emulator_wrapper.py
# (gcp-storage-emulator with its serving/speed limits lifted), run from the
# venv made by scripts/setup.sh, with --in-memory and bucket bucketfs-test.
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"

usage() {
    echo "usage: $0 start|stop|env [--name NAME]" >&2
    exit 2
}

(($# >= 1)) || usage
cmd="$1"
shift
NAME=emulator
while (($# > 0)); do
    case "$1" in
    --name)
        (($# >= 2)) || usage
        NAME="$2"
        shift 2
        ;;
    *) usage ;;
    esac
done

DIR="$REPO/.build/servers/$NAME"
PY="$REPO/.build/venv/bin/python"
PIDFILE="$DIR/pid"
PORTFILE="$DIR/port"

# shellcheck source=scripts/lib/processes.sh
source "$REPO/scripts/lib/processes.sh"

running_pid() { saved_pid "$PIDFILE" emulator_wrapper.py; }

do_stop() {
    local pid
    if pid="$(running_pid)"; then stop_pid "$pid"; fi
    rm -f "$PIDFILE" "$PORTFILE"
}

do_start() {
    if [[ ! -x "$PY" ]]; then
        echo "emulator.sh: $PY missing; run scripts/setup.sh first" >&2
        exit 1
    fi
    if running_pid >/dev/null; then
        echo "emulator.sh: '$NAME' already running (pid $(cat "$PIDFILE"), port $(cat "$PORTFILE"))" >&2
        exit 1
    fi
    mkdir -p "$DIR"
    rm -f "$PIDFILE" "$PORTFILE" "$DIR/stdout" "$DIR/stderr"
    : >"$DIR/requests.log"
    local port
    port="$(free_loopback_port "$PY")"
    "$PY" "$REPO/scripts/emulator_wrapper.py" \
        --host 127.0.0.1 --port "$port" --in-memory \
        --default-bucket bucketfs-test \
        --request-log "$DIR/requests.log" \
        >"$DIR/stdout" 2>"$DIR/stderr" </dev/null &
    local pid=$!
    echo "$pid" >"$PIDFILE"
    local deadline=$((SECONDS + 20))
    while ! grep -q "^READY $port\$" "$DIR/stdout" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "emulator.sh: emulator '$NAME' exited before READY; stderr:" >&2
            cat "$DIR/stderr" >&2 || true
            rm -f "$PIDFILE"
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            echo "emulator.sh: emulator '$NAME' not READY within 20 s; stderr:" >&2
            cat "$DIR/stderr" >&2 || true
            do_stop
            exit 1
        fi
        sleep 0.05
    done
    echo "$port" >"$PORTFILE"
    echo "emulator '$NAME' listening on http://127.0.0.1:$port (pid $pid)" >&2
}

case "$cmd" in
start) do_start ;;
stop) do_stop ;;
env)
    if [[ ! -f "$PORTFILE" ]]; then
        echo "emulator.sh: '$NAME' is not running" >&2
        exit 1
    fi
    echo "STORAGE_EMULATOR_HOST=http://127.0.0.1:$(cat "$PORTFILE")"
    ;;
*) usage ;;
esac
