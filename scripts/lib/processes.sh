# Shared by the scripts that start and stop our test servers
# (scripts/emulator.sh, scripts/fake_gcs_server.sh, scripts/test.sh).
# Source it; it defines functions only.

# saved_pid PIDFILE PATTERN: prints the PID saved in PIDFILE if that process
# is alive and its command line contains PATTERN (a stale pid file may name
# a PID reused by someone else's process, which is never ours to stop).
saved_pid() {
    [[ -f "$1" ]] || return 1
    local pid
    pid="$(cat "$1")"
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
    grep -q -- "$2" "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

# stop_pid PID: SIGTERM, up to 5 s to exit, then SIGKILL and up to 2 s more.
stop_pid() {
    local pid="$1"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.05
    done
}

# free_loopback_port PYTHON: a TCP port free on 127.0.0.1 right now.
free_loopback_port() {
    "$1" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}
