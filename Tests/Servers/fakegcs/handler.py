"""The HTTP handler (fault injection, request log, replies) and the loopback server."""

import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from fakegcs.base import HTTPError, Reply, error_body
from fakegcs.state import STATE
from fakegcs.control import control
from fakegcs.routing import dispatch


# --- HTTP -------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-gcs/1"
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    # Hooks for servers built on this one (firebase_emulator.py): the API
    # routes (called with STATE.lock held) and the /_ control endpoints.
    def route(self, method, path, query, headers, body, host):
        return dispatch(method, path, query, headers, body, host)

    def control(self, method, path, body):
        return control(method, path, body)

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length:
            n = int(length)
            data = self.rfile.read(n)
            if len(data) != n:
                raise ConnectionError("short body")
            return data
        te = self.headers.get("Transfer-Encoding", "")
        if te.lower() == "chunked":
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("eof in chunked body")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
            return b"".join(chunks)
        return b""

    def _send(self, reply, fault=None):
        body = reply.body if reply.status not in (204, 304) else b""
        if reply.status == 308:
            self.send_response(308, "Resume Incomplete")
        else:
            self.send_response(reply.status)
        for k, v in reply.headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if fault and fault.get("stall_seconds"):
            self.wfile.flush()
            time.sleep(float(fault["stall_seconds"]))
        if fault and fault.get("cut_after_bytes") is not None:
            self.wfile.write(body[: int(fault["cut_after_bytes"])])
            self.wfile.flush()
            self._abort()
            return
        self.wfile.write(body)

    def _abort(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _handle(self):
        try:
            body = self._read_body()
        except (ConnectionError, ValueError):
            self.close_connection = True
            return
        target = self.path
        path, _, raw_query = target.partition("?")
        method = self.command
        if path.startswith("/_"):
            try:
                reply = self.control(method, path, body)
            except (ValueError, TypeError, AttributeError) as e:
                reply = Reply.json({"error": "bad control request: %s" % e}, 400)
            self._send(reply)
            return
        with STATE.lock:
            STATE.requests.append({
                "method": method, "path": path, "query": raw_query,
                "authorization": self.headers.get("Authorization"),
                "userProject": self.headers.get("x-goog-user-project"),
            })
        fault = STATE.take_fault(method, target, self.headers.get("Authorization"))
        execute = fault is None or not (fault.get("status") or fault.get("drop")) or fault.get("apply")
        reply = None
        if execute:
            query = parse_qs(raw_query, keep_blank_values=True)
            host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
            with STATE.lock:
                try:
                    reply = self.route(method, path, query, self.headers, body, host)
                except HTTPError as e:
                    err = error_body(e.code, e.message, e.reason)
                    detail = e.headers.get("detail")
                    if detail:
                        err["error"]["errors"][0]["message"] = detail
                    reply = Reply.json(err, status=e.code)
                except Exception as e:  # a bug here: answer 500, keep serving
                    import traceback

                    traceback.print_exc(file=sys.stderr)
                    reply = Reply.json(error_body(500, "fake_gcs bug: %r" % e, "backendError"), 500)
        if fault and fault.get("drop"):
            self._abort()
            return
        if fault and fault.get("status"):
            code = int(fault["status"])
            if code == 401:
                body = error_body(code, "Invalid Credentials", "authError")
                body["error"]["errors"][0].update(locationType="header", location="Authorization")
                reply = Reply.json(body, status=code)
                reply.headers["WWW-Authenticate"] = 'Bearer realm="https://accounts.google.com/"'
            else:
                reply = Reply.json(
                    error_body(code, "Injected fault %d." % code, "injected"), status=code
                )
            self._send(reply)
            return
        self._send(reply, fault)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def do_HEAD(self):
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def loopback_arguments(parser):
    """--host (loopback only) and --port; the parsed arguments."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--host must be a loopback address")
    return args


def serve(host, port, handler):
    """Serves until SIGTERM/SIGINT; prints READY <port> once listening."""
    httpd = Server((host, port), handler)

    def _stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print("READY %d" % httpd.server_address[1], flush=True)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()
