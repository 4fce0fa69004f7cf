#!/usr/bin/env python3
"""An HTTP fault-injecting proxy for the bucketfs tests.

It sits between bucketfs and a GCS JSON API server on loopback (the
emulator), forwards every request unchanged, and injects the faults a test
registers: error answers, connections cut in the middle of a request body,
answers lost after the server acted, stalls, and outages that last a given
time. Standard library only; threaded; HTTP/1.1 keep-alive towards the
client (every answer has Content-Length).

Usage: fault_proxy.py --upstream http://127.0.0.1:PORT [--host 127.0.0.1] [--port 0]
Prints ``READY <port>`` on stdout once listening.

Controls (paths starting with ``/_``, answered by the proxy itself, never
faulted, never logged):

* ``POST /_faults`` a JSON object or a list of them. Each has optional
  ``method`` (exact, default any), ``path_contains`` (substring of the
  request target including its query string, default any) and
  ``min_body_bytes`` (only requests with at least that long a body, e.g.
  the chunks of a resumable upload but not its status queries), and how long it
  lasts: ``count`` uses (default 1), or ``for_seconds`` S (every matching
  request during the next S seconds; ``count`` is then ignored). Exactly
  one action. A ``for_seconds`` fault may come in bursts: with
  ``period_seconds`` P and ``burst_seconds`` B it acts only during the first
  B seconds of every P seconds (counted from its registration) and lets
  requests through otherwise. Exactly one action:

  ``"status": N``  answer N with a GCS-shaped error JSON, not forwarded;
  ``"drop": true``  close the connection without an answer, not forwarded;
  ``"cut_request_after_bytes": N``  read N bytes of the request body, then
      close the connection (the client sees its upload cut; nothing is
      forwarded, so the server keeps what it had before);
  ``"stall_seconds": S``  forward, then wait S seconds before answering;
  ``"stall_body_after_bytes": N``  forward, send the answer's status, headers
      (the full Content-Length) and its first N body bytes, then send nothing
      for ``stall_body_seconds`` (default 30) without closing, and close: a
      download that stalls mid-body (longer than the client's stall timeout).
  ``"cut_answer_after_bytes": N``  forward (the server acts), send the
      server's status line and headers (with the true Content-Length),
      then only the first N bytes of its body, then close the connection:
      a truncated final answer, as a connection lost while the answer
      travels leaves it. With ``"framed": true`` the Content-Length is N
      instead: a complete-looking answer whose body (JSON) is cut short.
  ``"throttle_bytes_per_second": N``  forward, then send the answer's body
      at N bytes per second (in 64 KiB pieces, paced from its first byte):
      one connection of a slow link, as a cloud store's connections are
      each far slower than the machine. Connections are throttled each on
      its own, so requests side by side add up.

  With ``"apply": true`` a ``status`` or ``drop`` fault forwards the request
  first (the server acts; its answer is lost). The first registered matching
  fault wins. Answers ``{"ok":true,"pending":N}``.
* ``DELETE /_faults`` removes every pending fault.
* ``GET /_requests`` JSON list of ``{"method","path","query","range","time","done","fault"}``
  for every request received (``range`` its Range header or null, ``time``
  when it arrived and ``done`` when its answer was sent, in seconds since
  the epoch, ``fault`` the action applied or null); ``POST /_requests/clear`` empties it.
"""

import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_gcs as gcs  # noqa: E402  (its loopback serving)

ACTIONS = ("status", "drop", "cut_request_after_bytes", "stall_seconds", "stall_body_after_bytes",
           "cut_answer_after_bytes", "throttle_bytes_per_second")
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
    "content-length",
}


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []
        self.requests = []

    def take_fault(self, method, target, length):
        now = time.time()
        with self.lock:
            self.faults = [f for f in self.faults if f.get("until") is None or f["until"] > now]
            for fault in self.faults:
                if fault.get("method") not in (None, "*", method):
                    continue
                if fault.get("path_contains", "") not in target:
                    continue
                # None: a chunked body, whose length shows only at its end;
                # only uploads send one, so it counts as long enough.
                if length is not None and length < int(fault.get("min_body_bytes", 0)):
                    continue
                period = fault.get("period_seconds")
                if period and (now - fault["since"]) % float(period) >= float(fault.get("burst_seconds", 0)):
                    continue
                if fault.get("until") is None:
                    fault["count"] -= 1
                    if fault["count"] <= 0:
                        self.faults.remove(fault)
                return dict(fault)
        return None


STATE = State()
UPSTREAM = None  # (host, port)
# One upstream connection per serving thread, reused across requests.
UPSTREAM_CONNECTIONS = threading.local()


def error_json(code, message):
    return json.dumps({
        "error": {
            "code": code, "message": message,
            "errors": [{"domain": "global", "reason": "injected", "message": message}],
        }
    }).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fault-proxy/1"
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    # -- plumbing --

    def _body_length(self):
        length = self.headers.get("Content-Length")
        return int(length) if length else 0

    def _chunked(self):
        return self.headers.get("Transfer-Encoding", "").lower() == "chunked"

    def _read_chunked(self, limit=None):
        """The body of a request sent with chunked transfer encoding (RFC 9112
        section 7.1; Cloud Storage takes uploads of unknown length so, see
        https://cloud.google.com/storage/docs/streaming-uploads), decoded;
        with `limit`, only until that many bytes have arrived."""
        chunks, total = [], 0
        while limit is None or total < limit:
            line = self.rfile.readline(65537)
            if not line:
                raise ConnectionError("end of stream in a chunked body")
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunk = self._read_exactly(size)
            chunks.append(chunk)
            total += len(chunk)
            self.rfile.readline(65537)
        return b"".join(chunks)

    def _read_body(self, length):
        """`length` bytes of body, or the whole chunked one (length None)."""
        return self._read_chunked() if length is None else self._read_exactly(length)

    def _read_exactly(self, n):
        chunks, left = [], n
        while left > 0:
            chunk = self.rfile.read(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("short body")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _abort(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_head(self, status, headers, length):
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _answer(self, status, headers, body):
        self._send_head(status, headers, len(body))
        self.wfile.write(body)

    def _forward(self, body):
        conn = getattr(UPSTREAM_CONNECTIONS, "conn", None)
        for attempt in range(2):
            if conn is None:
                conn = http.client.HTTPConnection(*UPSTREAM, timeout=600)
                UPSTREAM_CONNECTIONS.conn = conn
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    conn.close()
                    UPSTREAM_CONNECTIONS.conn = None
                return response.status, response.getheaders(), data
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                conn = None
                UPSTREAM_CONNECTIONS.conn = None
                if attempt == 1:
                    raise
        raise ConnectionError("unreachable")

    # -- controls --

    def _control(self, path, body):
        if path == "/_faults" and self.command == "POST":
            spec = json.loads(body or b"{}")
            specs = spec if isinstance(spec, list) else [spec]
            now = time.time()
            added = []
            for f in specs:
                actions = [a for a in ACTIONS if f.get(a) not in (None, False)]
                if len(actions) != 1:
                    return 400, {"error": "exactly one of %s" % (ACTIONS,)}
                f = dict(f)
                f["action"] = actions[0]
                f["since"] = now
                if f.get("for_seconds") is not None:
                    f["until"] = now + float(f["for_seconds"])
                else:
                    f["count"] = int(f.get("count", 1))
                    if f["count"] < 1:
                        return 400, {"error": "count must be >= 1"}
                added.append(f)
            with STATE.lock:
                STATE.faults.extend(added)
                pending = len(STATE.faults)
            return 200, {"ok": True, "pending": pending}
        if path == "/_faults" and self.command == "DELETE":
            with STATE.lock:
                STATE.faults.clear()
            return 200, {"ok": True}
        if path == "/_requests" and self.command == "GET":
            with STATE.lock:
                return 200, list(STATE.requests)
        if path == "/_requests/clear" and self.command == "POST":
            with STATE.lock:
                STATE.requests.clear()
            return 200, {"ok": True}
        return 404, {"error": "unknown control %s %s" % (self.command, path)}

    # -- requests --

    def _handle(self):
        target = self.path
        path, _, query = target.partition("?")
        if path.startswith("/_"):
            try:
                status, obj = self._control(path, self._read_exactly(self._body_length()))
            except (ValueError, TypeError) as e:
                status, obj = 400, {"error": "bad control request: %s" % e}
            self._answer(status, [("Content-Type", "application/json")], json.dumps(obj).encode())
            return
        length = None if self._chunked() else self._body_length()
        fault = STATE.take_fault(self.command, target, length)
        action = fault["action"] if fault else None
        record = {"method": self.command, "path": path, "query": query, "range": self.headers.get("Range"),
                  "chunked": length is None,
                  "time": time.time(), "done": None, "fault": action}
        with STATE.lock:
            STATE.requests.append(record)
        try:
            self._serve(length, fault, action)
        finally:
            with STATE.lock:
                record["done"] = time.time()

    def _serve(self, length, fault, action):
        if action == "cut_request_after_bytes":
            cut = int(fault["cut_request_after_bytes"])
            try:
                if length is None:
                    self._read_chunked(limit=cut)
                else:
                    self._read_exactly(min(length, cut))
            except ConnectionError:
                pass
            self._abort()
            return
        try:
            body = self._read_body(length)
        except (ConnectionError, ValueError):
            self._abort()
            return
        forward = action not in ("status", "drop") or fault.get("apply")
        answer = None
        if forward:
            try:
                answer = self._forward(body)
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                answer = (502, [("Content-Type", "application/json")], error_json(502, "upstream: %s" % e))
        if action == "drop":
            self._abort()
            return
        if action == "status":
            code = int(fault["status"])
            self._answer(code, [("Content-Type", "application/json")], error_json(code, "Injected fault %d." % code))
            return
        if action == "stall_seconds":
            time.sleep(float(fault["stall_seconds"]))
        if action == "stall_body_after_bytes":
            self._answer_stalling(answer, fault)
            return
        if action == "cut_answer_after_bytes":
            self._answer_cut(answer, int(fault["cut_answer_after_bytes"]), bool(fault.get("framed")))
            return
        if action == "throttle_bytes_per_second":
            self._answer_throttled(answer, float(fault["throttle_bytes_per_second"]))
            return
        self._answer(*answer)

    def _answer_throttled(self, answer, rate):
        """The whole answer, its body no faster than `rate` bytes/s."""
        status, headers, body = answer
        self._send_head(status, headers, len(body))
        started = time.monotonic()
        piece = 64 << 10
        for at in range(0, len(body), piece):
            due = started + at / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.wfile.write(body[at:at + piece])

    def _answer_stalling(self, answer, fault):
        """The answer's head and first bytes, then silence, then a close."""
        status, headers, body = answer
        self._send_head(status, headers, len(body))
        try:
            self.wfile.write(body[:int(fault["stall_body_after_bytes"])])
            self.wfile.flush()
        except OSError:
            pass
        time.sleep(float(fault.get("stall_body_seconds", 30)))
        self._abort()

    def _answer_cut(self, answer, keep, framed):
        """The answer's head, `keep` bytes of its body, then a closed
        connection; Content-Length the whole body's, or with `framed`
        the bytes kept."""
        status, headers, body = answer
        self._send_head(status, headers, min(keep, len(body)) if framed else len(body))
        self.wfile.write(body[:keep])
        self.wfile.flush()
        self._abort()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


def main():
    global UPSTREAM
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT")
    args = gcs.loopback_arguments(parser)
    upstream = urlsplit(args.upstream)
    if upstream.hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--upstream must be a loopback address")
    UPSTREAM = (upstream.hostname, upstream.port or 80)
    gcs.serve(args.host, args.port, Handler)


if __name__ == "__main__":
    main()
