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
  which demands the ``Metadata-Flavor: Google`` header, and answers
  ``GET /computeMetadata/v1/`` with ``Metadata-Flavor: Google`` (the probe
  Google's libraries make; https://cloud.google.com/compute/docs/metadata/querying-metadata).
* The refresh-token grant of a gcloud ``authorized_user`` file at ``/token``
  (https://developers.google.com/identity/protocols/oauth2/web-server#offline):
  client id, secret and refresh token must be the ``--client-id``,
  ``--client-secret`` and ``--refresh-token`` given; tokens ``user-N``.
* The Security Token Service at ``POST /sts``
  (https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token):
  the token-exchange grant with ``--audience`` and ``--subject-token``;
  tokens ``sts-N``.
* A subject-token URL at ``GET /subject``, for URL-sourced external
  accounts (https://google.aip.dev/auth/4117): it demands the header
  ``X-Test-Subject: yes`` and answers ``{"token": SUBJECT}``.
* IAM Credentials ``generateAccessToken`` at
  ``POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken``
  (https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/generateAccessToken):
  the caller's bearer token must be one this server issued; tokens
  ``iam-N-EMAIL``, with ``expireTime`` ``--lifetime`` seconds ahead.

Token lifetimes: every access token is valid for ``--lifetime`` seconds
(default 3600, what Google's endpoints give): ``expires_in`` of the OAuth
answers (RFC 6749 section 5.1; Google's token endpoint, the metadata server and
the STS all answer this way), and ``expireTime`` of ``generateAccessToken``,
an RFC 3339 timestamp (Google's JSON mapping of protobuf Timestamp: "Z"
normalised, 0, 3, 6 or 9 fractional digits,
https://protobuf.dev/reference/protobuf/google.protobuf/#timestamp); it is
written with ``--expire-time-digits`` fractional digits (default 0). A
short lifetime lets tests watch clients renew before expiry, as the
google-auth libraries do (they refresh once the token is within a few
minutes of its expiry: google.auth.credentials.Credentials.expired and
REFRESH_THRESHOLD in google-auth-library-python).

With ``--generate-key PATH`` the server makes a new RSA key, writes its
private half (PKCS #8 PEM, as ``private_key`` of a service-account key file
holds it) to PATH and checks JWTs against its public half, so a test
without crypto of its own can write a service-account key file.

Test controls:

* ``GET /_count``: how many tokens have been issued, as ``{"count": n}``.
* ``GET /_log``: ``[{"path", "authorization"}]`` of the token requests.
* ``GET /_issued``: ``{token: time}``, when each token was issued (Unix
  seconds, the server's clock): it expires ``--lifetime`` seconds later.
* ``POST /_advance?seconds=N``: moves the server's clock forward, so that a
  client whose injected clock jumped ahead still passes the iat/exp checks.
* ``POST /_metadata_fail?status=N``: the next metadata token request
  answers status N.

Usage: token_server.py --port 0 [--public-key key.pem --kid ID --issuer EMAIL]
       [--scope SCOPE] [--client-id ID --client-secret S --refresh-token T]
       [--audience A --subject-token T] [--lifetime SECONDS]
       [--expire-time-digits 0|3|6|9] [--generate-key PATH]
Prints ``READY <port>`` on stdout once listening, and exits on SIGTERM or,
when its stdin is a pipe, when that reaches EOF (the test process died
without stopping it).
Standard library only, apart from ``cryptography``.
"""

import argparse
import base64
import json
import os
import re
import signal
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
GENERATE_ACCESS_TOKEN = re.compile(r"^/v1/projects/-/serviceAccounts/([^/:]+):generateAccessToken$")
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
        self.tokens = set()
        self.issued_at = {}
        self.log = []

    def now(self):
        with self.lock:
            return time.time() + self.clock_offset

    def issue(self, prefix="tok", suffix=""):
        with self.lock:
            self.issued += 1
            token = "%s-%d%s" % (prefix, self.issued, suffix)
            self.tokens.add(token)
            self.issued_at[token] = time.time() + self.clock_offset
            return token


class Refused(Exception):
    """The grant is rejected; the message becomes error_description."""


def b64url_decode(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_assertion(state, assertion):
    """Checks the JWT as Google would; raises Refused with the reason."""
    if state.public_key is None:
        raise Refused("this server was started without --public-key")
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


def rfc3339(moment, digits):
    """``2014-10-02T15:01:23Z``, or with ``digits`` fractional digits
    (truncated, as protobuf's Timestamp formatting does)."""
    whole = int(moment)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    if digits:
        text += "." + ("%09d" % int((moment - whole) * 1e9))[:digits]
    return text + "Z"


def generate_key(path):
    """Writes a new RSA private key to ``path``; returns its public key."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    with open(path, "wb") as file:
        file.write(pem)
    return key.public_key()


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

    def token(self, prefix="tok"):
        return {"access_token": self.state.issue(prefix), "expires_in": self.state.args.lifetime,
                "token_type": "Bearer"}

    def refresh_grant(self, form):
        """The refresh-token grant; None when it holds, else the refusal."""
        args = self.state.args
        expected = {"client_id": args.client_id, "client_secret": args.client_secret,
                    "refresh_token": args.refresh_token}
        for name, value in expected.items():
            if form.get(name) != [value]:
                return {"error": "invalid_grant" if name == "refresh_token" else "invalid_client",
                        "error_description": "wrong %s" % name}
        return None

    def exchange(self, form):
        """The STS token exchange (RFC 8693 as Google's STS takes it)."""
        args = self.state.args
        if form.get("grant_type") != [TOKEN_EXCHANGE]:
            return self.reply(400, {"error": "unsupported_grant_type"})
        if form.get("requested_token_type") != [ACCESS_TOKEN_TYPE]:
            return self.reply(400, {"error": "invalid_request", "error_description": "requested_token_type"})
        if form.get("audience") != [args.audience]:
            return self.reply(400, {"error": "invalid_target", "error_description": "unknown audience"})
        if not form.get("subject_token_type") or not form.get("scope"):
            return self.reply(400, {"error": "invalid_request", "error_description": "subject_token_type and scope"})
        if form.get("subject_token") != [args.subject_token]:
            return self.reply(400, {"error": "invalid_grant", "error_description": "the subject token is not valid"})
        self.reply(200, dict(self.token("sts"), issued_token_type=ACCESS_TOKEN_TYPE))

    def generate_access_token(self, email, body):
        authorization = self.headers.get("Authorization", "")
        token = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None
        with self.state.lock:
            known = token in self.state.tokens
        if not known:
            return self.reply(401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.",
                                              "status": "UNAUTHENTICATED"}})
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = None
        if not isinstance(request, dict) or not request.get("scope"):
            return self.reply(400, {"error": {"code": 400, "message": "scope is required", "status": "INVALID_ARGUMENT"}})
        expiry = rfc3339(self.state.now() + self.state.args.lifetime, self.state.args.expire_time_digits)
        self.reply(200, {"accessToken": self.state.issue("iam", "-" + email), "expireTime": expiry})

    def record(self, path):
        with self.state.lock:
            self.state.log.append({"path": path, "authorization": self.headers.get("Authorization")})

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/_count":
            with self.state.lock:
                return self.reply(200, {"count": self.state.issued})
        if url.path == "/_log":
            with self.state.lock:
                return self.reply(200, list(self.state.log))
        if url.path == "/_issued":
            with self.state.lock:
                return self.reply(200, dict(self.state.issued_at))
        self.record(url.path)
        if url.path == "/computeMetadata/v1/":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.reply(403, {"error": "forbidden"})
            body = b"instance/\nproject/\n"
            self.send_response(200)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", "application/text")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if url.path == "/subject":
            if self.headers.get("X-Test-Subject") != "yes":
                return self.reply(403, {"error": "missing X-Test-Subject header"})
            return self.reply(200, {"token": self.state.args.subject_token})
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
        self.record(url.path)
        impersonation = GENERATE_ACCESS_TOKEN.match(url.path)
        if impersonation:
            return self.generate_access_token(impersonation.group(1).replace("%40", "@"), body)
        if url.path not in ("/token", "/sts"):
            return self.reply(404, {"error": "not_found"})
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "body must be application/x-www-form-urlencoded"})
        form = parse_qs(body.decode("ascii", "replace"), keep_blank_values=True)
        if url.path == "/sts":
            return self.exchange(form)
        if form.get("grant_type") == ["refresh_token"]:
            refusal = self.refresh_grant(form)
            return self.reply(400, refusal) if refusal else self.reply(200, self.token("user"))
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
    parser.add_argument("--public-key", help="PEM file of the service account's public key (without it the JWT grant is refused)")
    parser.add_argument("--kid", help="expected private_key_id")
    parser.add_argument("--issuer", help="expected client_email")
    parser.add_argument("--scope", default="https://www.googleapis.com/auth/devstorage.full_control")
    parser.add_argument("--client-id", default="test-client.apps.googleusercontent.com")
    parser.add_argument("--client-secret", default="test-client-secret")
    parser.add_argument("--refresh-token", default="1//test-refresh-token")
    parser.add_argument("--audience", default="//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/test")
    parser.add_argument("--subject-token", default="test-subject-token")
    parser.add_argument("--lifetime", type=int, default=3600, help="seconds every access token is valid for")
    parser.add_argument("--expire-time-digits", type=int, choices=(0, 3, 6, 9), default=0,
                        help="fractional digits of generateAccessToken's expireTime")
    parser.add_argument("--generate-key", metavar="PATH",
                        help="write a new RSA private key (PEM) to PATH and check JWTs against it")
    args = parser.parse_args()
    public_key = None
    if args.generate_key:
        public_key = generate_key(args.generate_key)
    elif args.public_key:
        with open(args.public_key, "rb") as file:
            public_key = serialization.load_pem_public_key(file.read())

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.state = State(args, public_key)
    server.state.port = server.server_address[1]
    # Watched only when it is a pipe from the parent: a harness that gives
    # /dev/null stops the server by its pid.
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        threading.Thread(target=exit_when_parent_goes_away, daemon=True).start()
    print("READY %d" % server.state.port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
