"""Routing of the Firebase APIs, the test controls, the request log and the
HTTP handler built on fake_gcs's."""

import json
import re
import threading
import time
from urllib.parse import unquote

import fake_gcs as gcs
from firebase.auth import ACCOUNTS, Config, REQUESTS, check_api_key, h_secure_token, h_sign_in_custom_token, h_sign_in_password, h_sign_up, request_fields
from firebase.rules import caller
from firebase.storage import v0_delete, v0_get, v0_list, v0_patch, v0_upload


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
