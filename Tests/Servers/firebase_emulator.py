#!/usr/bin/env python3
"""Firebase Storage (REST API v0) and Firebase Auth on loopback, for the
bucketfs tests: what a Firebase app's users talk to.

Modelled on the Firebase Local Emulator Suite (firebase-tools'
``src/emulator/storage/apis/firebase.ts`` and ``src/emulator/auth/``) and on
what the Firebase SDKs send; written for these tests. Standard library only.
The object store, listing, ranges, multipart parsing, fault injection and
request log are fake_gcs.py's (imported), so this one server also answers
the Cloud Storage JSON API, without rules, as the emulator's admin view:
tests check results through it.

Usage: firebase_emulator.py [--host 127.0.0.1] [--port 0]
       [--project demo-bucketfs] [--api-key fake-api-key]
       [--token-lifetime 3600]
Prints ``READY <port>`` on stdout once listening.

Security rules (the pattern most apps use; rules_version 2, where ``**``
matches zero or more segments)::

    match /users/{uid}/{path=**} { allow read, write: if request.auth.uid == uid; }
    match /public/{path=**}      { allow read; allow write: if request.auth != null; }
    // everything else: denied

A bucket whose name starts with ``signed-in`` has the rules of Firebase's
getting-started guide instead: any signed-in user may read and write
anything (``allow read, write: if request.auth != null``).

A list request is checked against the listed prefix without its trailing
slash (listing the root checks ""). A denial is 403 ``{"error": {"code":
403, "message": "Permission denied. No READ permission."}}`` (LIST, WRITE
alike), as the emulator answers.

Authorization (storage requests): ``Firebase <idToken>`` (``Bearer`` is
accepted too). ``Firebase owner`` / ``Bearer owner`` is the emulator's
admin, which bypasses the rules. No header: the rules see no auth. A token
that is malformed, not from this project or expired is 401 (production
Firebase Storage's answer; the emulator does not check expiry). ID tokens
are unsigned JWTs (``alg: none``), as the Auth emulator issues them.

Storage, under ``/v0/b/{bucket}/o`` (objects are one %-encoded segment,
decoded twice as the emulator does: ``a%2541.txt`` is ``aA.txt``, and
``100%25.txt`` is a 500; see ``decode_uri_component``):

* ``GET /o?prefix=&delimiter=&maxResults=&pageToken=`` list: ``prefixes``,
  ``items`` (only ``name`` and ``bucket``), ``nextPageToken``; pages of at
  most 1000.
* ``GET /o/{o}`` metadata: the object resource with int64s as strings,
  ``downloadTokens`` (comma-separated; the object's custom metadata key
  ``firebaseStorageDownloadTokens``, which is not shown in ``metadata``;
  one is made on first read if missing), ``contentEncoding`` ``identity``
  by default, ``crc32c`` the decimal uint32 (the JSON API's is base64).
  ``?alt=media`` the bytes (``Range`` honoured); with
  ``&token=T`` (a download token) no rules apply. No ``x-goog-*`` headers
  (no generation, no hash), as the emulator.
* ``PATCH /o/{o}`` metadata update: writable properties given are set, null
  deletes; ``metadata`` keys merge, a null value deletes one, ``"metadata":
  null`` deletes all (download tokens survive).
* ``DELETE /o/{o}`` 204.
* ``POST /o?name=N`` uploads (``PUT`` too), by ``X-Goog-Upload-Protocol``:
  ``multipart`` (two parts: JSON metadata, bytes); ``resumable`` with
  ``X-Goog-Upload-Command: start`` (JSON metadata body;
  ``X-Goog-Upload-Header-Content-Type`` / ``-Content-Length``) answers
  ``X-Goog-Upload-Status: active``, ``X-Goog-Upload-URL`` (this path plus
  ``&upload_id=ID&upload_protocol=resumable``) and
  ``X-Goog-Upload-Chunk-Granularity: 262144``. To the upload URL:
  ``query`` (the text ``OK`` with ``X-Goog-Upload-Status``
  active/final/cancelled and ``X-Goog-Upload-Size-Received``; never the
  object, even once final), ``upload`` with ``X-Goog-Upload-Offset`` (a
  chunk starting past the received size is 400; bytes already received are
  skipped; ``OK``), ``upload, finalize`` or ``finalize`` (the object,
  ``X-Goog-Upload-Status: final``; a repeated ``finalize`` is ``OK`` with
  ``X-Goog-Upload-Status: final``, bytes for a session no longer active
  400), ``cancel`` (``OK``; 400 once final). Rules are checked at start and at finalize. No
  preconditions exist in v0.

Auth (as the Auth emulator, under ``/identitytoolkit.googleapis.com/v1`` and
``/securetoken.googleapis.com/v1``; every call needs ``?key=`` equal to
``--api-key``, else 400 ``API key not valid...``):

* ``accounts:signUp`` ``{email, password}`` or ``{}`` (anonymous);
* ``accounts:signInWithPassword`` ``{email, password}`` (``EMAIL_NOT_FOUND``,
  ``INVALID_PASSWORD``, ``USER_DISABLED``);
* ``accounts:signInWithCustomToken`` ``{token}``: a JWT whose payload has
  ``uid`` (signature not checked, as the emulator; ``exp`` in the past is
  ``INVALID_CUSTOM_TOKEN``); the user is created on first use;
* ``POST /securetoken.googleapis.com/v1/token`` form or JSON
  ``grant_type=refresh_token&refresh_token=R``: ``id_token``,
  ``access_token``, ``refresh_token``, ``expires_in``, ``user_id``,
  ``project_id`` (``INVALID_REFRESH_TOKEN``, ``USER_DISABLED``,
  ``USER_NOT_FOUND``);
* ``DELETE /emulator/v1/projects/{project}/accounts`` deletes every user.

Errors are ``{"error": {"code": 400, "message": "CODE", "errors": [...]}}``.

Test controls (besides fake_gcs.py's ``/_faults``, ``/_reset``,
``/_requests``):

* ``POST /_auth/config`` ``{"tokenLifetime": S}`` sets the lifetime of ID
  tokens issued from now on; with ``"localId": U`` for that user only.
* ``POST /_auth/disable`` ``{"localId": U, "disabled": true}``.
* ``GET /_firebase/requests`` the v0 storage requests seen, each
  ``{"method", "path", "query", "auth"}`` with ``auth`` ``none``, ``admin``,
  ``uid:U`` or ``invalid`` (and ``command``, ``offset``: the
  ``X-Goog-Upload-*`` headers, and ``scheme``, the Authorization
  header's first word, when sent); ``POST /_firebase/requests/clear``
  empties it and resets the next figure.
* ``POST /_latency`` ``{"ms": N}``: every later request (but the ``/_``
  ones) waits N ms before it is handled, outside any lock, as a round
  trip to a distant server would (the benchmark's 20 ms rows).
* ``GET /_uploads`` every resumable session of either protocol, each
  ``{"id", "bucket", "name", "status", "firebase"}`` with ``status``
  ``active``, ``final`` or ``cancelled``.
* ``GET /_firebase/concurrency`` ``{"widest": N}``: the most requests
  (of any kind, control requests included) handled at once since the last
  clear.
"""

import argparse
import base64
import json
import os
import re
import secrets
import sys
import threading
import time
import uuid
from urllib.parse import parse_qs, quote, unquote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_gcs as gcs  # noqa: E402

TOKEN_KEY = "firebaseStorageDownloadTokens"
GRANULARITY = 256 * 1024


class Config:
    project = "demo-bucketfs"
    api_key = "fake-api-key"
    token_lifetime = 3600


# --- Auth ---------------------------------------------------------------------


class Accounts:
    """Users and refresh tokens. Guarded by gcs.STATE.lock (routes run
    with it held; controls take it)."""

    def __init__(self):
        self.users = {}  # localId -> dict
        self.refresh = {}  # refresh token -> localId
        self.lifetimes = {}  # localId -> seconds

    def by_email(self, email):
        for user in self.users.values():
            if user.get("email") == email:
                return user
        return None

    def create(self, provider, email=None, password=None, local_id=None):
        local_id = local_id or "".join(
            secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            for _ in range(28)
        )
        user = {"localId": local_id, "provider": provider, "disabled": False, "createdAt": time.time()}
        if email is not None:
            user["email"] = email
            user["password"] = password
        self.users[local_id] = user
        return user


ACCOUNTS = Accounts()
REQUESTS = []  # storage and auth requests with who made them


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_payload(token):
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    payload = json.loads(b64url_decode(parts[1]))
    if not isinstance(payload, dict):
        raise ValueError("JWT payload is not an object")
    return payload


def auth_error(message, code=400, status="INVALID_ARGUMENT"):
    err = gcs.HTTPError(code, message, "invalid")
    err.status = status
    return err


def issue_tokens(user):
    """A fresh ID token and a new refresh token for `user`."""
    now = int(time.time())
    lifetime = ACCOUNTS.lifetimes.get(user["localId"], Config.token_lifetime)
    claims = {
        "iss": "https://securetoken.google.com/%s" % Config.project,
        "aud": Config.project,
        "auth_time": now,
        "user_id": user["localId"],
        "sub": user["localId"],
        "iat": now,
        "exp": now + lifetime,
        "firebase": {"identities": {}, "sign_in_provider": user["provider"]},
    }
    if user.get("email"):
        claims["email"] = user["email"]
        claims["email_verified"] = False
        claims["firebase"]["identities"] = {"email": [user["email"]]}
    header = {"alg": "none", "typ": "JWT"}
    id_token = "%s.%s." % (
        b64url(json.dumps(header).encode()),
        b64url(json.dumps(claims).encode()),
    )
    refresh = b64url(secrets.token_bytes(48))
    ACCOUNTS.refresh[refresh] = user["localId"]
    return id_token, refresh, lifetime


def sign_in_reply(user, kind, extra=None):
    id_token, refresh, lifetime = issue_tokens(user)
    body = {
        "kind": kind,
        "localId": user["localId"],
        "idToken": id_token,
        "refreshToken": refresh,
        "expiresIn": str(lifetime),
    }
    if user.get("email"):
        body["email"] = user["email"]
    body.update(extra or {})
    return gcs.Reply.json(body)


def check_api_key(query):
    key = gcs.q1(query, "key")
    if not key:
        raise auth_error(
            "The request is missing a valid API key.", code=403, status="PERMISSION_DENIED"
        )
    if key != Config.api_key:
        raise auth_error("API key not valid. Please pass a valid API key.")


def request_fields(headers, body):
    if "application/x-www-form-urlencoded" in (headers.get("Content-Type") or ""):
        return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    return gcs.json_body(body)


def h_sign_up(body):
    email, password = body.get("email"), body.get("password")
    if email is None and password is None:
        return sign_in_reply(ACCOUNTS.create("anonymous"), "identitytoolkit#SignupNewUserResponse")
    if not email or not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
        raise auth_error("INVALID_EMAIL" if email else "MISSING_EMAIL")
    if not password:
        raise auth_error("MISSING_PASSWORD")
    if len(password) < 6:
        raise auth_error("WEAK_PASSWORD : Password should be at least 6 characters")
    if ACCOUNTS.by_email(email.lower()):
        raise auth_error("EMAIL_EXISTS")
    user = ACCOUNTS.create("password", email.lower(), password)
    return sign_in_reply(user, "identitytoolkit#SignupNewUserResponse")


def h_sign_in_password(body):
    email, password = body.get("email"), body.get("password")
    if not email:
        raise auth_error("INVALID_EMAIL")
    if not password:
        raise auth_error("MISSING_PASSWORD")
    user = ACCOUNTS.by_email(email.lower())
    if user is None:
        raise auth_error("EMAIL_NOT_FOUND")
    if user.get("password") != password:
        raise auth_error("INVALID_PASSWORD")
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    return sign_in_reply(user, "identitytoolkit#VerifyPasswordResponse", {"registered": True})


def h_sign_in_custom_token(body):
    token = body.get("token")
    if not token:
        raise auth_error("MISSING_CUSTOM_TOKEN")
    try:
        claims = jwt_payload(token)
    except (ValueError, UnicodeDecodeError):
        raise auth_error("INVALID_CUSTOM_TOKEN : Invalid assertion format.")
    uid = claims.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > 128:
        raise auth_error("INVALID_CUSTOM_TOKEN : Custom token is missing a valid uid.")
    exp = claims.get("exp")
    if isinstance(exp, (int, float)) and exp < time.time():
        raise auth_error("INVALID_CUSTOM_TOKEN : Custom token has expired.")
    user = ACCOUNTS.users.get(uid)
    is_new = user is None
    if is_new:
        user = ACCOUNTS.create("custom", local_id=uid)
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    return sign_in_reply(user, "identitytoolkit#VerifyCustomTokenResponse", {"isNewUser": is_new})


def h_secure_token(fields):
    if fields.get("grant_type") != "refresh_token":
        raise auth_error("INVALID_GRANT_TYPE")
    refresh = fields.get("refresh_token")
    if not refresh:
        raise auth_error("MISSING_REFRESH_TOKEN")
    local_id = ACCOUNTS.refresh.get(refresh)
    if local_id is None:
        raise auth_error("INVALID_REFRESH_TOKEN")
    user = ACCOUNTS.users.get(local_id)
    if user is None:
        raise auth_error("USER_NOT_FOUND")
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    id_token, new_refresh, lifetime = issue_tokens(user)
    # The refresh token stays the same for the session, as in production.
    del ACCOUNTS.refresh[new_refresh]
    return gcs.Reply.json(
        {
            "access_token": id_token,
            "expires_in": str(lifetime),
            "token_type": "Bearer",
            "refresh_token": refresh,
            "id_token": id_token,
            "user_id": local_id,
            "project_id": Config.project,
        }
    )


# --- who is asking --------------------------------------------------------------


def caller(headers):
    """'admin', a uid, or None (no credentials). A bad or expired token
    is 401."""
    value = (headers.get("Authorization") or "").strip()
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme not in ("Firebase", "Bearer") or not token:
        raise gcs.HTTPError(401, "Invalid Authorization header.", "unauthorized")
    if token == "owner":
        return "admin"
    try:
        claims = jwt_payload(token)
    except (ValueError, UnicodeDecodeError):
        raise gcs.HTTPError(401, "Invalid Firebase ID token: not a JWT.", "unauthorized")
    if claims.get("aud") != Config.project or claims.get("iss") != (
        "https://securetoken.google.com/%s" % Config.project
    ):
        raise gcs.HTTPError(401, "Firebase ID token has the wrong audience or issuer.", "unauthorized")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or exp <= time.time():
        raise gcs.HTTPError(
            401,
            "Firebase ID token has expired. Get a fresh ID token from your client app and try again.",
            "unauthorized",
        )
    uid = claims.get("user_id")
    if not isinstance(uid, str) or not uid:
        raise gcs.HTTPError(401, "Firebase ID token has no user_id.", "unauthorized")
    return uid


def permitted(op, path, who, bucket=""):
    """The rules (see the module docstring). op: get, list or write."""
    if who == "admin":
        return True
    if bucket.startswith("signed-in"):
        return who is not None
    segments = path.split("/")
    if segments[0] == "users" and len(segments) >= 2 and segments[1]:
        return who is not None and who == segments[1]
    if segments[0] == "public":
        return op in ("get", "list") or who is not None
    return False


def require(op, path, who, bucket=""):
    if not permitted(op, path, who, bucket):
        word = {"get": "READ", "list": "LIST", "write": "WRITE"}[op]
        raise gcs.HTTPError(403, "Permission denied. No %s permission." % word, "forbidden")


# --- Storage v0 ---------------------------------------------------------------


def download_tokens(obj):
    """The object's download tokens, making one if it has none."""
    custom = obj.resource.setdefault("metadata", {})
    if not custom.get(TOKEN_KEY):
        custom[TOKEN_KEY] = str(uuid.uuid4())
    return custom[TOKEN_KEY]


def firebase_metadata(obj):
    r = obj.resource
    tokens = download_tokens(obj)
    out = {
        k: r[k]
        for k in (
            "name", "bucket", "generation", "metageneration", "contentType", "timeCreated",
            "updated", "storageClass", "size", "md5Hash", "crc32c", "etag", "contentDisposition",
            "cacheControl", "contentLanguage",
        )
        if k in r
    }
    if "crc32c" in out:
        # The emulator keeps and sends crc32c as the decimal uint32
        # (firebase-tools src/emulator/storage/metadata.ts: StoredFileMetadata
        # sets `${crc32c(bytes)}`, OutgoingFirebaseMetadata copies it), not
        # the JSON API's base64; x-goog-hash is not sent by v0 at all.
        out["crc32c"] = str(int.from_bytes(base64.b64decode(out["crc32c"]), "big"))
    out["contentEncoding"] = r.get("contentEncoding", "identity")
    out["downloadTokens"] = tokens
    custom = {k: v for k, v in (r.get("metadata") or {}).items() if k != TOKEN_KEY}
    if custom:
        out["metadata"] = custom
    return out


def metadata_reply(obj):
    return gcs.Reply.json(firebase_metadata(obj))


def upload_props(meta, fallback_type):
    props = {k: v for k, v in meta.items() if k in gcs.WRITABLE}
    props.setdefault("contentType", fallback_type or "application/octet-stream")
    custom = dict(props.get("metadata") or {})
    custom[TOKEN_KEY] = str(uuid.uuid4())
    props["metadata"] = custom
    return props


def v0_list(bucket, query, who):
    prefix = gcs.q1(query, "prefix", "")
    require("list", prefix[:-1] if prefix.endswith("/") else prefix, who, bucket)
    allowed = {k: v for k, v in query.items() if k in ("prefix", "delimiter", "maxResults", "pageToken")}
    full = json.loads(gcs.h_list(bucket, allowed).body)
    result = {
        "prefixes": full.get("prefixes", []),
        "items": [{"name": i["name"], "bucket": i["bucket"]} for i in full.get("items", [])],
    }
    if full.get("nextPageToken"):
        result["nextPageToken"] = full["nextPageToken"]
    return gcs.Reply.json(result)


def v0_get(bucket, name, query, headers, who):
    # Rules first: a denied caller learns nothing about existence. A
    # download token opens its object regardless of the rules.
    token = gcs.q1(query, "token")
    if not token:
        require("get", name, who, bucket)
    obj = gcs.live_object(bucket, name, {})
    if token and token not in download_tokens(obj).split(","):
        require("get", name, who, bucket)
    if gcs.q1(query, "alt") != "media":
        return metadata_reply(obj)
    reply = gcs._media_reply(obj, headers)
    for key in [k for k in reply.headers if k.lower().startswith("x-goog-")]:
        del reply.headers[key]
    return reply


def v0_patch(bucket, name, body, who):
    require("write", name, who, bucket)
    obj = gcs.live_object(bucket, name, {})
    tokens = download_tokens(obj)
    obj.patch(gcs.json_body(body))
    obj.resource.setdefault("metadata", {})[TOKEN_KEY] = tokens
    return metadata_reply(obj)


def v0_delete(bucket, name, who):
    require("write", name, who, bucket)
    gcs.live_object(bucket, name, {})
    del gcs.STATE.objects[(bucket, name)]
    return gcs.Reply(204)


def v0_upload(bucket, query, headers, body, host, who):
    gcs.check_bucket(bucket)
    if "upload_id" in query:
        return v0_session_command(query, headers, body, who)
    name = gcs.q1(query, "name")
    if not name:
        raise gcs.bad_request("An object name is required (?name=).")
    protocol = (headers.get("X-Goog-Upload-Protocol") or "").lower()
    if protocol == "multipart":
        require("write", name, who, bucket)
        (_, meta_raw), (part_headers, content) = gcs.parse_multipart(headers.get("Content-Type"), body)
        props = upload_props(gcs.json_body(meta_raw), part_headers.get("content-type"))
        return metadata_reply(gcs.store_object(bucket, name, content, props, {}))
    if protocol != "resumable":
        raise gcs.bad_request("X-Goog-Upload-Protocol must be multipart or resumable.")
    if (headers.get("X-Goog-Upload-Command") or "").lower() != "start":
        raise gcs.bad_request("A resumable upload starts with X-Goog-Upload-Command: start.")
    require("write", name, who, bucket)
    declared = headers.get("X-Goog-Upload-Header-Content-Length")
    upload_id = uuid.uuid4().hex
    gcs.STATE.uploads[upload_id] = {
        "firebase": True,
        "bucket": bucket,
        "name": name,
        "meta": gcs.json_body(body),
        "type": headers.get("X-Goog-Upload-Header-Content-Type"),
        "declared": int(declared) if declared else None,
        "who": who,
        "data": bytearray(),
        "status": "active",
        "result": None,
    }
    url = "http://%s/v0/b/%s/o?name=%s&upload_id=%s&upload_protocol=resumable" % (
        host, quote(bucket, safe=""), quote(name, safe=""), upload_id,
    )
    return gcs.Reply(200, b"", {
        "X-Goog-Upload-Status": "active",
        "X-Goog-Upload-URL": url,
        "X-Goog-Upload-Chunk-Granularity": str(GRANULARITY),
        "X-GUploader-UploadID": upload_id,
    })


def ok_reply(headers):
    """Express's ``res.sendStatus(200)``, which the emulator answers most
    session commands with: the text ``OK``, no JSON."""
    return gcs.Reply(200, b"OK", dict(headers, **{"Content-Type": "text/plain; charset=utf-8"}))


def session_reply(session):
    """What the emulator answers ``query``: ``OK`` with the bytes received
    and the session's status (active, final or cancelled), never the object,
    even once final (firebase-tools src/emulator/storage/apis/firebase.ts,
    the ``query`` branch; the status names are upload.ts's UploadStatus)."""
    return ok_reply({
        "X-Goog-Upload-Status": session["status"],
        "X-Goog-Upload-Size-Received": str(len(session["data"])),
    })


def v0_session_command(query, headers, body, who):
    session = gcs.STATE.uploads.get(gcs.q1(query, "upload_id", ""))
    if session is None or not session.get("firebase"):
        raise gcs.not_found("No such upload session.")
    command = [c.strip() for c in (headers.get("X-Goog-Upload-Command") or "").lower().split(",")]
    if command == ["query"]:
        return session_reply(session)
    if command == ["cancel"]:
        # upload.ts cancelResumableUpload: a final session is not cancellable (400).
        if session["status"] == "final":
            raise gcs.bad_request("The upload is already final.")
        session["status"] = "cancelled"
        return ok_reply({})
    if session["status"] == "final" and command == ["finalize"]:
        # A repeated finalize: the first one's status code as plain text,
        # with X-Goog-Upload-Status: final (firebase.ts, the
        # UploadPreviouslyFinalizedError branch).
        return ok_reply({"X-Goog-Upload-Status": "final"})
    if session["status"] != "active":
        # upload.ts continueResumableUpload / finalizeResumableUpload: bytes
        # for a session that is not active are UploadNotActiveError, 400.
        raise gcs.bad_request("The upload is %s." % session["status"])
    data = session["data"]
    if "upload" in command:
        offset = headers.get("X-Goog-Upload-Offset")
        if offset is None or not offset.isdigit():
            raise gcs.bad_request("X-Goog-Upload-Offset is required.")
        offset = int(offset)
        if offset > len(data):
            raise gcs.bad_request(
                "Invalid request: offset %d, but only %d bytes were received." % (offset, len(data))
            )
        data.extend(body[len(data) - offset:])
    elif command != ["finalize"]:
        raise gcs.bad_request("Unknown X-Goog-Upload-Command %r." % headers.get("X-Goog-Upload-Command"))
    if "finalize" not in command:
        return ok_reply({"X-Goog-Upload-Status": "active"})
    if session["declared"] is not None and session["declared"] != len(data):
        raise gcs.bad_request(
            "The upload declared %d bytes but holds %d." % (session["declared"], len(data))
        )
    require("write", session["name"], session["who"], session["bucket"])
    props = upload_props(session["meta"], session["type"])
    obj = gcs.store_object(session["bucket"], session["name"], bytes(data), props, {})
    session["status"] = "final"
    return gcs.Reply.json(firebase_metadata(obj), headers={"X-Goog-Upload-Status": "final"})


# --- routing --------------------------------------------------------------------

SEG = r"([^/]+)"
V0_OBJECT = re.compile(r"/v0/b/%s/o/(.+)" % SEG)
V0_BUCKET = re.compile(r"/v0/b/%s/o/?" % SEG)
IDENTITY = re.compile(r"/identitytoolkit\.googleapis\.com/v1/accounts:(\w+)")
SECURE_TOKEN = "/securetoken.googleapis.com/v1/token"
EMULATOR_ACCOUNTS = re.compile(r"/emulator/v1/projects/%s/accounts" % SEG)


def route_firebase(method, path, query, headers, body, host):
    """A Firebase route's reply, or None for a path that is not one."""
    m = IDENTITY.fullmatch(path)
    if m and method == "POST":
        check_api_key(query)
        fields = request_fields(headers, body)
        handler = {
            "signUp": h_sign_up,
            "signInWithPassword": h_sign_in_password,
            "signInWithCustomToken": h_sign_in_custom_token,
        }.get(m.group(1))
        if handler is None:
            raise gcs.HTTPError(404, "Not implemented: accounts:%s" % m.group(1), "notFound")
        return handler(fields)
    if path == SECURE_TOKEN and method == "POST":
        check_api_key(query)
        return h_secure_token(request_fields(headers, body))
    m = EMULATOR_ACCOUNTS.fullmatch(path)
    if m and method == "DELETE":
        ACCOUNTS.users.clear()
        ACCOUNTS.refresh.clear()
        return gcs.Reply.json({})
    m_object = V0_OBJECT.fullmatch(path)
    m_bucket = V0_BUCKET.fullmatch(path)
    if not (m_object or m_bucket):
        return None
    try:
        who = caller(headers)
    except gcs.HTTPError:
        log(method, path, query, "invalid", headers)
        raise
    log(method, path, query, "none" if who is None else who if who == "admin" else "uid:" + who, headers)
    if m_bucket:
        bucket = unquote(m_bucket.group(1))
        if method == "GET":
            return v0_list(bucket, query, who)
        if method in ("POST", "PUT"):
            return v0_upload(bucket, query, headers, body, host, who)
    else:
        bucket, name = unquote(m_object.group(1)), decode_uri_component(unquote(m_object.group(2)))
        if method == "GET":
            return v0_get(bucket, name, query, headers, who)
        if method == "PATCH" or (
            method == "PUT" and (headers.get("X-HTTP-Method-Override") or "").upper() == "PATCH"
        ):
            return v0_patch(bucket, name, body, who)
        if method == "DELETE":
            return v0_delete(bucket, name, who)
    raise gcs.HTTPError(405, "Method %s not allowed on %s" % (method, path), "methodNotAllowed")


def decode_uri_component(text):
    """JavaScript's decodeURIComponent, which the emulator applies to the
    object segment Express has already decoded (firebase-tools
    src/emulator/storage/apis/firebase.ts: ``decodeURIComponent(
    req.params.objectId)``), so names are decoded twice there: ``a%2541.txt``
    reaches ``aA.txt``. A ``%`` not followed by two hex digits, or bytes that
    are not UTF-8, throw URIError, which Express answers 500 (its default
    error handler), every time."""
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise gcs.HTTPError(500, "URIError: URI malformed", "backendError")
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise gcs.HTTPError(500, "URIError: URI malformed", "backendError")


def log(method, path, query, auth, headers):
    entry = {"method": method, "path": path, "query": query_text(query), "auth": auth}
    for header, key in (("X-Goog-Upload-Command", "command"), ("X-Goog-Upload-Offset", "offset")):
        if headers.get(header) is not None:
            entry[key] = headers.get(header)
    if headers.get("Authorization"):
        entry["scheme"] = headers.get("Authorization").split(" ")[0]
    REQUESTS.append(entry)


def session_state(upload_id, session):
    """A resumable session as ``GET /_uploads`` lists it, either protocol:
    ``active``, ``final`` or ``cancelled`` (v0: a session cancelled with
    ``X-Goog-Upload-Command: cancel``; the JSON API: one cancelled with a
    DELETE of its URI, https://cloud.google.com/storage/docs/performing-resumable-uploads#cancel-upload)."""
    if session.get("firebase"):
        status = session["status"]
    else:
        status = "cancelled" if session.get("cancelled") else "final" if session.get("result") is not None else "active"
    return {"id": upload_id, "bucket": session["bucket"], "name": session["name"], "status": status,
            "firebase": bool(session.get("firebase"))}


def query_text(query):
    return "&".join("%s=%s" % (k, v) for k, vs in sorted(query.items()) for v in vs)


def control(method, path, body):
    with gcs.STATE.lock:
        if path == "/_auth/config" and method == "POST":
            spec = json.loads(body or b"{}")
            lifetime = int(spec["tokenLifetime"])
            if spec.get("localId"):
                ACCOUNTS.lifetimes[spec["localId"]] = lifetime
            else:
                Config.token_lifetime = lifetime
            return gcs.Reply.json({"ok": True})
        if path == "/_auth/disable" and method == "POST":
            spec = json.loads(body or b"{}")
            user = ACCOUNTS.users.get(spec.get("localId"))
            if user is None:
                return gcs.Reply.json({"error": "no such user"}, 404)
            user["disabled"] = bool(spec.get("disabled", True))
            return gcs.Reply.json({"ok": True})
        if path == "/_firebase/requests" and method == "GET":
            return gcs.Reply.json(list(REQUESTS))
        if path == "/_firebase/requests/clear" and method == "POST":
            REQUESTS.clear()
            with InFlight.lock:
                InFlight.widest = 0
            return gcs.Reply.json({"ok": True})
        if path == "/_latency" and method == "POST":
            with InFlight.lock:
                InFlight.latency = float(json.loads(body or b"{}").get("ms", 0)) / 1000
            return gcs.Reply.json({"ok": True})
        if path == "/_uploads" and method == "GET":
            return gcs.Reply.json([session_state(k, v) for k, v in gcs.STATE.uploads.items()])
        if path == "/_firebase/concurrency" and method == "GET":
            with InFlight.lock:
                # This request itself is in flight too.
                return gcs.Reply.json({"widest": InFlight.widest})
    return gcs.control(method, path, body)


class InFlight:
    """Requests being handled at once (the widest seen since a reset), to
    show that a client's requests overlapped; and the delay every request
    waits before it is handled (``/_latency``), to stand for a round trip."""

    lock = threading.Lock()
    current = 0
    widest = 0
    latency = 0.0


class Handler(gcs.Handler):
    server_version = "firebase-emulator/1"

    def _counted(self):
        with InFlight.lock:
            InFlight.current += 1
            InFlight.widest = max(InFlight.widest, InFlight.current)
            latency = InFlight.latency
        if latency and not self.path.startswith("/_"):
            time.sleep(latency)
        try:
            gcs.Handler._handle(self)
        finally:
            with InFlight.lock:
                InFlight.current -= 1

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _counted

    def route(self, method, path, query, headers, body, host):
        try:
            reply = route_firebase(method, path, query, headers, body, host)
        except gcs.HTTPError as e:
            status = getattr(e, "status", None)
            if status is None:
                raise
            # Identity Toolkit's error shape: message is the error code.
            return gcs.Reply.json(
                {"error": {"code": e.code, "message": e.message, "status": status,
                           "errors": [{"message": e.message, "domain": "global", "reason": e.reason}]}},
                status=e.code,
            )
        if reply is not None:
            return reply
        return gcs.dispatch(method, path, query, headers, body, host)

    def control(self, method, path, body):
        return control(method, path, body)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=Config.project)
    parser.add_argument("--api-key", default=Config.api_key)
    parser.add_argument("--token-lifetime", type=int, default=Config.token_lifetime)
    args = gcs.loopback_arguments(parser)
    Config.project, Config.api_key, Config.token_lifetime = args.project, args.api_key, args.token_lifetime
    gcs.serve(args.host, args.port, Handler)


if __name__ == "__main__":
    main()
