#!/usr/bin/env python3
"""A TCP proxy on loopback that adds network latency (this kernel has no netem).

    delay_proxy.py --target HOST:PORT --rtt-ms MS [--port 0] [--log PATH]

Listens on 127.0.0.1 (port 0: a free one) and prints ``READY <port>`` on
stdout once listening. Every accepted connection is forwarded to TARGET
with these costs, which are what a client at a round-trip time of MS sees:

* a new connection costs one round trip before its first byte moves (the
  TCP handshake); nothing is read from the client until then;
* every chunk of bytes, in each direction, is delivered half a round trip
  after it was read, in order, so a request and its answer cost one round
  trip on top of the server's time.

Bandwidth is not limited, but at most ``--window`` bytes (default 16 MiB)
may be in flight per direction and connection; a reader past it waits (so a
slow reader cannot make the proxy buffer a whole object). Standard library
only (asyncio).

``--log PATH`` appends ``OPEN <time> <n>`` when connection n is accepted,
``REQ <time> <n>`` when a request starts on it (its first bytes from the
client, or the first after the server had answered), and ``CONN <n>
<bytes up> <bytes down> <seconds open>`` when it closes; times are Unix
seconds. The bench counts round trips from these lines (bench_helper.py
round-trips): requests that start less than half a round trip apart went
out together, so each group is one round trip a workload waited for, and
so is each group of new connections (their handshake).
"""

import argparse
import asyncio
import os
import signal
import socket
import sys
import time

CHUNK = 1 << 20


class Counter:
    def __init__(self, log_path):
        self.connections = 0
        self.log_path = log_path

    def write(self, line):
        if not self.log_path:
            return
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


async def pump(reader, writer, delay, window, counts, key, turns=None):
    """Copies reader -> writer, each chunk delivered `delay` s after it was
    read. `turns` (client -> server only) is called at each chunk that
    starts a request."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()
    in_flight = 0
    room = asyncio.Event()
    room.set()

    async def deliver():
        nonlocal in_flight
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
            in_flight -= len(data)
            if in_flight < window:
                room.set()
        if writer.can_write_eof():
            writer.write_eof()

    sender = asyncio.ensure_future(deliver())
    try:
        while True:
            await room.wait()
            data = await reader.read(CHUNK)
            if not data:
                break
            if turns is not None:
                turns()
            counts[key] += len(data)
            in_flight += len(data)
            if in_flight >= window:
                room.clear()
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        queue.put_nowait((0, None))
        try:
            await sender
        except (ConnectionError, OSError):
            pass


async def handle(client_reader, client_writer, target, rtt, window, counter):
    counter.connections += 1
    number = counter.connections
    opened = time.monotonic()
    counts = {"up": 0, "down": 0}
    counter.write(f"OPEN {time.time():.6f} {number}")
    # A request starts with the first bytes from the client after the
    # server sent something (or the first bytes at all).
    answered = {"down": -1}

    def turns():
        if answered["down"] != counts["down"]:
            answered["down"] = counts["down"]
            counter.write(f"REQ {time.time():.6f} {number}")
    # The handshake: one round trip before anything moves.
    await asyncio.sleep(rtt)
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.close()
        return
    for w in (client_writer, server_writer):
        sock = w.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    half = rtt / 2
    await asyncio.gather(
        pump(client_reader, server_writer, half, window, counts, "up", turns),
        pump(server_reader, client_writer, half, window, counts, "down"),
        return_exceptions=True,
    )
    for w in (client_writer, server_writer):
        try:
            w.close()
        except OSError:
            pass
    counter.write(f"CONN {number} {counts['up']} {counts['down']} {time.monotonic() - opened:.3f}")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--rtt-ms", type=float, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--window", type=int, default=16 << 20)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    host, _, port = args.target.rpartition(":")
    target = (host or "127.0.0.1", int(port))
    rtt = args.rtt_ms / 1000.0
    counter = Counter(args.log)

    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target, rtt, args.window, counter),
        host="127.0.0.1", port=args.port, backlog=256, limit=CHUNK)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: counter.write(f"COUNT {counter.connections}"))
    print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()
    # Connections still open are simply dropped (the bench stops the proxy
    # only after its workloads ended); no task teardown noise.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
