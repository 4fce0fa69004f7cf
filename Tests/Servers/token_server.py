#!/usr/bin/env python3
"""A loopback OAuth2 token server for the StorageKit credentials tests.

It plays two roles:

* Google's token endpoint (``POST /token``): the JWT-bearer grant is checked
  independently of the Swift code that produced it -- header, claims and the
  RS256 signature against the test service account's public key (with the
  ``cryptography`` package from the test venv), so a bug in the Swift JWT
  code cannot be mirrored by a bug here.
* The GCE metadata server
  (``GET /computeMetadata/v1/instance/service-accounts/default/token``),
  which demands the ``Metadata-Flavor: Google`` header.

Test controls:

* ``GET /_count``: how many tokens have been issued, as ``{"count": n}``.
* ``POST /_advance?seconds=N``: moves the server's clock forward, so that a
  client whose injected clock jumped ahead still passes the iat/exp checks.
* ``POST /_metadata_fail?status=N``: the next metadata token request
  answers status N.

Usage: token_server.py --port 0 --public-key key.pem --kid ID --issuer EMAIL
       [--scope SCOPE]
Prints ``READY <port>`` on stdout once listening, and exits on SIGTERM or
when its stdin reaches EOF (the test process died without stopping it).
Standard library only, apart from ``cryptography``.
"""

import argparse
import base64
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
MAX_SKEW = 300  # seconds of clock difference tolerated on iat


class State:
    def __init__(self, args, public_key):
        self.args = args
        self.public_key = public_key
        self.lock = threading.Lock()
        self.issued = 0
        self.clock_offset = 0.0
        self.metadata_fail = None
        self.port = 0

    def now(self):
        with self.lock:
            return time.time() + self.clock_offset

    def issue(self):
        with self.lock:
            self.issued += 1
            return "tok-%d" % self.issued


class Refused(Exception):
    """The grant is rejected; the message becomes error_description."""


def b64url_decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_assertion(state, assertion):
    """Checks the JWT as Google would; raises Refused with the reason."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise Refused("assertion is not a three-part JWT")
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except ValueError as error:
        raise Refused("malformed JWT: %s" % error)
    if any(p.endswith("=") for p in parts):
        raise Refused("JWT parts must be base64url without padding")
    if header.get("alg") != "RS256":
        raise Refused("alg must be RS256, got %r" % header.get("alg"))
    if header.get("typ") != "JWT":
        raise Refused("typ must be JWT, got %r" % header.get("typ"))
    if header.get("kid") != state.args.kid:
        raise Refused("unknown key id %r" % header.get("kid"))
    try:
        state.public_key.verify(
            signature, (parts[0] + "." + parts[1]).encode("ascii"),
            padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise Refused("Invalid JWT Signature.")
    if claims.get("iss") != state.args.issuer:
        raise Refused("iss must be %s, got %r" % (state.args.issuer, claims.get("iss")))
    audience = "http://127.0.0.1:%d/token" % state.port
    if claims.get("aud") != audience:
        raise Refused("aud must be %s, got %r" % (audience, claims.get("aud")))
    if claims.get("scope") != state.args.scope:
        raise Refused("scope must be %s, got %r" % (state.args.scope, claims.get("scope")))
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        raise Refused("iat and exp must be integers")
    now = state.now()
    if abs(iat - now) > MAX_SKEW:
        raise Refused("iat is %d s away from the server's clock" % int(iat - now))
    if exp - iat != 3600:
        raise Refused("exp must be iat + 3600, got iat + %d" % (exp - iat))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "token_server/1"

    def log_message(self, format, *args):  # keep the test output clean
        pass

    @property
    def state(self):
        return self.server.state

    def reply(self, status, payload):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def token(self):
        return {"access_token": self.state.issue(), "expires_in": 3600, "token_type": "Bearer"}

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/_count":
            with self.state.lock:
                return self.reply(200, {"count": self.state.issued})
        if url.path == METADATA_TOKEN_PATH:
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, {"error": "forbidden",
                                        "error_description": "Missing Metadata-Flavor: Google header"})
            with self.state.lock:
                fail, self.state.metadata_fail = self.state.metadata_fail, None
            if fail is not None:
                return self.reply(fail, {"error": "not_found",
                                         "error_description": "no service account for this instance"})
            return self.reply(200, self.token())
        self.reply(404, {"error": "not_found"})

    def do_POST(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        body = self.read_body()
        if url.path == "/_advance":
            with self.state.lock:
                self.state.clock_offset += float(query["seconds"][0])
            return self.reply(200, {})
        if url.path == "/_metadata_fail":
            with self.state.lock:
                self.state.metadata_fail = int(query["status"][0])
            return self.reply(200, {})
        if url.path != "/token":
            return self.reply(404, {"error": "not_found"})
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "body must be application/x-www-form-urlencoded"})
        form = parse_qs(body.decode("ascii", "replace"), keep_blank_values=True)
        if form.get("grant_type") != [JWT_BEARER]:
            return self.reply(400, {"error": "unsupported_grant_type",
                                    "error_description": "grant_type must be %s" % JWT_BEARER})
        assertion = form.get("assertion", [""])
        if len(assertion) != 1:
            return self.reply(400, {"error": "invalid_request", "error_description": "one assertion expected"})
        try:
            verify_assertion(self.state, assertion[0])
        except Refused as refusal:
            return self.reply(400, {"error": "invalid_grant", "error_description": str(refusal)})
        self.reply(200, self.token())


def exit_when_parent_goes_away():
    """Exits once stdin is closed, so a crashed test leaves no server behind."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    os._exit(0)


def main():
    # A child inherits its parent's signal mask: the Swift test process has
    # SIGTERM blocked on its threads, which would make terminate() a no-op.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--public-key", required=True, help="PEM file of the service account's public key")
    parser.add_argument("--kid", required=True, help="expected private_key_id")
    parser.add_argument("--issuer", required=True, help="expected client_email")
    parser.add_argument("--scope", default="https://www.googleapis.com/auth/devstorage.full_control")
    args = parser.parse_args()
    with open(args.public_key, "rb") as file:
        public_key = serialization.load_pem_public_key(file.read())

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = State(args, public_key)
    server.state.port = server.server_address[1]
    threading.Thread(target=exit_when_parent_goes_away, daemon=True).start()
    print("READY %d" % server.state.port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
