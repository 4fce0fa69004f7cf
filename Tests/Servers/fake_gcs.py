#!/usr/bin/env python3
"""A small in-memory GCS JSON API server for the bucketfs tests.

It exists for what the emulator lacks: real paging, preconditions, rewrite
token loops, resumable-session details, and injected faults. Standard
library only; threaded; HTTP/1.1 keep-alive (every response has
Content-Length); listens on loopback only.

Usage: fake_gcs.py [--host 127.0.0.1] [--port 0]
Prints ``READY <port>`` on stdout once listening.

Buckets: every bucket exists, except names starting with ``missing``
(404 ``notFound`` on every call). Object names in paths are URL-encoded
(``%2F`` for ``/``).

GCS endpoints (prefix ``/storage/v1``; uploads under ``/upload/storage/v1``):

* ``GET  /b/{b}`` bucket resource.
* ``GET  /b/{b}/o`` list: ``prefix``, ``delimiter``, ``maxResults`` (1-1000,
  default 1000; each item and each prefix counts), ``pageToken`` (opaque),
  ``includeTrailingDelimiter``, ``startOffset``/``endOffset``. Sorted by name.
  ``items``/``prefixes``/``nextPageToken`` are omitted when empty, as on GCS.
  ``fields`` (partial response, e.g. ``nextPageToken,items(name,size)``)
  keeps only the fields named.
* ``GET  /b/{b}/o/{o}`` metadata; with ``alt=media`` the bytes (also at
  ``/download/storage/v1/b/{b}/o/{o}``): ``Range: bytes=a-b|a-|-n`` gives 206
  + Content-Range (416 if unsatisfiable); whole-object answers carry
  ``x-goog-hash: crc32c=...,md5=...``; all carry ``x-goog-generation``,
  ``x-goog-metageneration``, ``x-goog-stored-content-length``.
  ``generation=N`` that is not the live generation gives 404.
* ``PATCH /b/{b}/o/{o}`` GCS merge semantics: writable properties given are
  set, null deletes them; inside ``metadata`` keys are merged, a null value
  deletes a key, ``"metadata": null`` clears it. metageneration += 1.
* ``DELETE /b/{b}/o/{o}`` 204.
* ``POST /b/{b}/o/{o}/compose`` objects.compose
  (https://cloud.google.com/storage/docs/json_api/v1/objects/compose): 1 to
  32 ``sourceObjects`` of the bucket concatenated into the object, with the
  body's ``destination`` properties and metadata and the query's
  preconditions on the destination; the composite has a crc32c and no
  md5Hash (https://cloud.google.com/storage/docs/composite-objects).
* ``POST /b/{b}/o/{o}/rewriteTo/b/{db}/o/{do}`` optional JSON body with
  destination properties (its ``metadata`` replaces the source's). Objects
  over 1 MiB: first call done=false + ``rewriteToken``; the call carrying that
  token finishes (done=true + ``resource``). ``copyTo`` finishes at once.
* ``POST /upload/storage/v1/b/{b}/o?uploadType=media|multipart|resumable``
  (``name=`` in the query, or in the multipart/resumable JSON metadata).
  Resumable: the POST answers 200 with ``Location: .../o?uploadType=resumable
  &upload_id=ID``; ``PUT`` to it with ``Content-Range: bytes a-b/total`` or
  ``bytes a-b/*`` appends (308 with ``Range: bytes=0-N``, no Range while
  nothing is stored, for non-final chunks; a start before the stored size
  skips the overlap, a start after it is 400); ``bytes */total`` or
  ``bytes */*`` queries the status (and finishes a session whose bytes all
  arrived); a PUT without Content-Range is the whole object; ``DELETE``
  cancels (499); a PUT to a finished session answers the object again.
* Preconditions (query): ``ifGenerationMatch`` (0 = must not exist),
  ``ifGenerationNotMatch``, ``ifMetagenerationMatch``,
  ``ifMetagenerationNotMatch`` on get/download/patch/delete/uploads/rewrite
  destination; ``ifSource(Meta)generation(Not)Match`` on the rewrite source.
  Failure: 412 ``conditionNotMet``, except that a failed ``...NotMatch`` on a
  GET answers 304 Not Modified (empty body) as GCS does. Resumable sessions
  check the preconditions given at the POST both at the POST and when they
  finish.

Errors are GCS-shaped:
``{"error":{"code":N,"message":M,"errors":[{"domain":"global","reason":R,"message":M}]}}``.

Test controls (not recorded, never faulted):

* ``POST /_faults`` a JSON object or a list of them. Each has optional
  ``method`` (exact, default any) and ``path_contains`` (substring of the
  request target *including the query string*, default any), ``count``
  (default 1), and one action:
  ``"status": N`` answer N with a GCS error JSON (reason ``injected``), the
  request not executed;
  ``"cut_after_bytes": N`` execute, send the full headers (true
  Content-Length) then only N body bytes, then close the socket;
  ``"stall_seconds": S`` execute, send the headers, sleep S, then the body;
  ``"drop": true`` close the connection without any response, the request
  not executed.
  With ``"apply": true`` a ``status``/``drop`` fault executes the request
  first (the write happens, the answer is lost). With ``"after": N`` the
  first N matching requests pass untouched before it acts. With
  ``"authorization": "Bearer T"`` only requests whose Authorization header
  is exactly that match (a revoked or expired token: with ``"status": 401``
  it is refused however often it comes back). With ``"anonymous": true``
  only requests without an Authorization header match (with ``"status":
  401``, a server that requires credentials).
  A 401 answer is the one GCS gives a token it does not accept
  (https://cloud.google.com/storage/docs/json_api/v1/status-codes#401_Unauthorized):
  message "Invalid Credentials", reason ``authError``, location
  ``Authorization``, and a ``WWW-Authenticate: Bearer`` header (RFC 6750
  section 3). The first
  registered matching fault wins; each use decrements its count. Answers
  ``{"ok":true,"pending":N}``. ``GET /_faults`` lists the pending ones.
* ``POST /_seed`` ``{"bucket", "prefix", "dirs", "files"}`` creates many
  small objects at once (benchmarks; see ``control``); listed like any other,
  each becomes a full object when first read or changed.
* ``POST /_retention`` ``{"bucket", "seconds"}`` gives the bucket a
  retention policy (``seconds`` null: none): the bucket resource carries
  ``retentionPolicy`` and an object younger than it cannot be deleted (403
  ``retentionPolicyNotMet``), as in
  https://cloud.google.com/storage/docs/bucket-lock.
* ``POST /_reset`` clears objects, retention policies, sessions, rewrite tokens, faults and the
  request list (generations keep increasing).
* ``GET /_requests`` JSON list of ``{"method","path","query",
  "authorization","userProject"}`` seen (path as sent, still URL-encoded;
  query the raw query string; the Authorization and x-goog-user-project
  headers, or null) excluding ``/_`` paths; ``POST /_requests/clear``
  empties it.
"""

import argparse
import base64
import bisect
import hashlib
import json
import re
import signal
import socket
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote

REWRITE_CHUNK = 1 << 20  # objects larger than this take two rewrite calls

WRITABLE = (
    "acl",
    "cacheControl",
    "contentDisposition",
    "contentEncoding",
    "contentLanguage",
    "contentType",
    "customTime",
    "eventBasedHold",
    "metadata",
    "storageClass",
    "temporaryHold",
)

# --- CRC32C (Castagnoli, reflected polynomial 0x82F63B78) ------------------


def _crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    table = _CRC_TABLE
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def b64_crc32c(data):
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


def b64_md5(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


SEED_MD5 = None  # set below, once the checksum functions exist
SEED_CRC32C = None


def now_rfc3339():
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (now.microsecond // 1000)


# --- errors -----------------------------------------------------------------


class HTTPError(Exception):
    def __init__(self, code, message, reason, headers=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.headers = headers or {}


def error_body(code, message, reason):
    return {
        "error": {
            "code": code,
            "message": message,
            "errors": [{"domain": "global", "reason": reason, "message": message}],
        }
    }


def not_found(message):
    return HTTPError(404, message, "notFound")


def bad_request(message, reason="invalid"):
    return HTTPError(400, message, reason)


PRECONDITION_MESSAGE = "At least one of the pre-conditions you specified did not hold."


def precondition_failed(detail):
    return HTTPError(412, PRECONDITION_MESSAGE, "conditionNotMet", {"detail": detail})


class NotModified(Exception):
    pass


# --- state ------------------------------------------------------------------


class Reply:
    def __init__(self, status=200, body=b"", headers=None):
        self.status = status
        self.body = body
        self.headers = headers or {}

    @classmethod
    def json(cls, obj, status=200, headers=None):
        h = {"Content-Type": "application/json; charset=UTF-8"}
        h.update(headers or {})
        return cls(status, json.dumps(obj).encode(), h)


def new_resource(bucket, name, generation, size, md5, crc32c, created):
    """The resource of a new object (metageneration 1, default type and
    class), as both live and bulk-seeded objects start."""
    return {
        "kind": "storage#object",
        "bucket": bucket,
        "name": name,
        "generation": str(generation),
        "metageneration": "1",
        "contentType": "application/octet-stream",
        "storageClass": "STANDARD",
        "size": str(size),
        "md5Hash": md5,
        "crc32c": crc32c,
        "timeCreated": created,
        "updated": created,
    }


class Obj:
    """One live object: bytes and resource."""

    def __init__(self, bucket, name, data, props, generation):
        self.data = data
        created = now_rfc3339()
        self.resource = new_resource(bucket, name, generation, len(data), b64_md5(data), b64_crc32c(data), created)
        self.resource["timeStorageClassUpdated"] = created
        for key in WRITABLE:
            val = props.get(key)
            if val is None:
                continue
            if key == "metadata":
                val = {k: str(v) for k, v in val.items() if v is not None}
                if not val:
                    continue
            self.resource[key] = val
        self._refresh_links()

    def _refresh_links(self):
        r = self.resource
        enc = quote(r["name"], safe="")
        r["id"] = "%s/%s/%s" % (r["bucket"], r["name"], r["generation"])
        r["selfLink"] = "http://127.0.0.1/storage/v1/b/%s/o/%s" % (r["bucket"], enc)
        r["mediaLink"] = (
            "http://127.0.0.1/download/storage/v1/b/%s/o/%s?generation=%s&alt=media"
            % (r["bucket"], enc, r["generation"])
        )
        r["etag"] = base64.b64encode(
            ("%s/%s" % (r["generation"], r["metageneration"])).encode()
        ).decode()

    @property
    def updated_epoch(self):
        stamp = self.resource["updated"].replace("Z", "+00:00")
        return datetime.fromisoformat(stamp).timestamp()

    @property
    def generation(self):
        return int(self.resource["generation"])

    @property
    def metageneration(self):
        return int(self.resource["metageneration"])

    def patch(self, body):
        r = self.resource
        for key in WRITABLE:
            if key not in body:
                continue
            val = body[key]
            if val is None:
                r.pop(key, None)
            elif key == "metadata":
                if not isinstance(val, dict):
                    raise bad_request("metadata must be an object")
                merged = dict(r.get("metadata") or {})
                for mk, mv in val.items():
                    if mv is None:
                        merged.pop(mk, None)
                    else:
                        merged[mk] = str(mv)
                if merged:
                    r["metadata"] = merged
                else:
                    r.pop("metadata", None)
            else:
                r[key] = val
        r["metageneration"] = str(self.metageneration + 1)
        r["updated"] = now_rfc3339()
        self._refresh_links()


class Seeded:
    """What ``POST /_seed`` stores per object: its generation only. The
    bytes (SEED_DATA) and the resource are the same for all of them, so a
    million objects fit in a few hundred MB; an object becomes a full
    ``Obj`` when anything but a listing touches it."""

    __slots__ = ("generation",)

    def __init__(self, generation):
        self.generation = generation


SEED_DATA = b"seeded object\n"


def seeded_resource(bucket, name, generation):
    r = new_resource(bucket, name, generation, len(SEED_DATA), SEED_MD5, SEED_CRC32C, "2026-01-01T00:00:00.000000Z")
    r["id"] = "%s/%s/%s" % (bucket, name, generation)
    r["selfLink"] = "http://127.0.0.1/storage/v1/b/%s/o/%s" % (bucket, quote(name, safe=""))
    return r


class ObjectTable(dict):
    """(bucket, name) -> Obj, plus bulk-seeded objects (``Seeded``) and a
    sorted index of names per bucket for listings (rebuilt after a change,
    so paging through a million names costs O(log n + page) per page)."""

    def __init__(self):
        super().__init__()
        self.seeded = {}
        self._sorted = {}

    def _materialize(self, key):
        seed = self.seeded.pop(key, None)
        if seed is None:
            return None
        obj = Obj(key[0], key[1], SEED_DATA, {}, seed.generation)
        obj.resource.update(seeded_resource(key[0], key[1], seed.generation))
        dict.__setitem__(self, key, obj)
        return obj

    def __getitem__(self, key):
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        obj = self._materialize(key)
        if obj is None:
            raise KeyError(key)
        return obj

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key):
        return dict.__contains__(self, key) or key in self.seeded

    def __setitem__(self, key, value):
        self.seeded.pop(key, None)
        if not dict.__contains__(self, key):
            self._sorted.pop(key[0], None)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        if key in self.seeded:
            del self.seeded[key]
        else:
            dict.__delitem__(self, key)
        self._sorted.pop(key[0], None)

    def seed(self, bucket, names, generation):
        for name in names:
            if not dict.__contains__(self, (bucket, name)):
                self.seeded[(bucket, name)] = Seeded(generation())
        self._sorted.pop(bucket, None)

    def resource(self, bucket, name):
        seed = self.seeded.get((bucket, name))
        if seed is not None:
            return seeded_resource(bucket, name, seed.generation)
        return dict.__getitem__(self, (bucket, name)).resource

    def sorted_names(self, bucket):
        names = self._sorted.get(bucket)
        if names is None:
            names = sorted(
                [n for (b, n) in dict.keys(self) if b == bucket] + [n for (b, n) in self.seeded if b == bucket]
            )
            self._sorted[bucket] = names
        return names


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.next_generation = int(time.time() * 1_000_000)
        self.reset()

    def reset(self):
        self.objects = ObjectTable()  # (bucket, name) -> Obj
        self.uploads = {}  # upload_id -> dict
        self.rewrites = {}  # token -> dict
        self.faults = []
        self.requests = []
        self.retention = {}  # bucket -> seconds

    def new_generation(self):
        self.next_generation += 1
        return self.next_generation

    def take_fault(self, method, target, authorization=None):
        with self.lock:
            for fault in self.faults:
                if fault.get("method") not in (None, "*", method):
                    continue
                if fault.get("path_contains", "") not in target:
                    continue
                if fault.get("authorization") not in (None, authorization):
                    continue
                if fault.get("anonymous") and authorization is not None:
                    continue
                if fault.get("after", 0) > 0:
                    fault["after"] -= 1
                    return None
                fault["count"] -= 1
                if fault["count"] <= 0:
                    self.faults.remove(fault)
                return dict(fault)
        return None


STATE = State()
SEED_MD5 = b64_md5(SEED_DATA)
SEED_CRC32C = b64_crc32c(SEED_DATA)


# --- helpers ----------------------------------------------------------------


def check_bucket(bucket):
    if bucket.startswith("missing"):
        raise not_found("The specified bucket does not exist.")


def q1(query, key, default=None):
    vals = query.get(key)
    return vals[0] if vals else default


def q_int(query, key):
    val = q1(query, key)
    if val is None:
        return None
    try:
        return int(val)
    except ValueError:
        raise bad_request("Invalid value for %s: %s" % (key, val))


def no_such_object(bucket, name):
    return not_found("No such object: %s/%s" % (bucket, name))


def live_object(bucket, name, query, gen_key="generation"):
    check_bucket(bucket)
    obj = STATE.objects.get((bucket, name))
    if obj is None:
        raise no_such_object(bucket, name)
    gen = q_int(query, gen_key)
    if gen is not None and gen != obj.generation:
        raise no_such_object(bucket, name)
    return obj


def check_preconditions(query, obj, prefix="if", not_modified=False):
    """GCS preconditions on obj (None: the object does not exist)."""
    gm = q_int(query, prefix + "GenerationMatch")
    gnm = q_int(query, prefix + "GenerationNotMatch")
    mm = q_int(query, prefix + "MetagenerationMatch")
    mnm = q_int(query, prefix + "MetagenerationNotMatch")
    gen = obj.generation if obj else 0
    if gm is not None and gm != gen:
        raise precondition_failed("%sGenerationMatch=%d, generation is %d" % (prefix, gm, gen))
    if mm is not None and (obj is None or mm != obj.metageneration):
        raise precondition_failed("%sMetagenerationMatch=%d" % (prefix, mm))
    if gnm is not None and gnm == gen:
        if not_modified:
            raise NotModified()
        raise precondition_failed("%sGenerationNotMatch=%d" % (prefix, gnm))
    if mnm is not None and obj is not None and mnm == obj.metageneration:
        if not_modified:
            raise NotModified()
        raise precondition_failed("%sMetagenerationNotMatch=%d" % (prefix, mnm))


def store_object(bucket, name, data, props, query):
    """Create a new generation of bucket/name after checking preconditions."""
    check_bucket(bucket)
    if not name:
        raise bad_request("Object name is required.", "required")
    if len(name.encode()) > 1024:
        raise bad_request("The object name is too long.")
    check_preconditions(query, STATE.objects.get((bucket, name)))
    for key, fn in (("md5Hash", b64_md5), ("crc32c", b64_crc32c)):
        want = props.get(key)
        if want and want != fn(data):
            raise bad_request(
                "Provided %s %r doesn't match calculated %r." % (key, want, fn(data))
            )
    obj = Obj(bucket, name, data, props, STATE.new_generation())
    STATE.objects[(bucket, name)] = obj
    return obj


def json_body(body):
    if not body:
        return {}
    try:
        val = json.loads(body)
    except ValueError:
        raise bad_request("Invalid JSON payload.", "parseError")
    if not isinstance(val, dict):
        raise bad_request("JSON body must be an object.", "parseError")
    return val


def parse_multipart(content_type, body):
    m = re.search(r'boundary="?([^";]+)"?', content_type or "")
    if not m:
        raise bad_request("multipart upload without boundary")
    delim = b"--" + m.group(1).encode()
    parts = []
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            raise bad_request("malformed multipart part")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        headers = {}
        for line in head.split(b"\r\n"):
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        parts.append((headers, content))
    if len(parts) != 2:
        raise bad_request("multipart upload needs exactly 2 parts")
    return parts


# --- GCS handlers -------------------------------------------------------------


def h_bucket_get(bucket, query):
    check_bucket(bucket)
    return Reply.json(
        {
            "kind": "storage#bucket",
            "id": bucket,
            "name": bucket,
            "location": "US",
            "storageClass": "STANDARD",
            "metageneration": "1",
            **(
                {"retentionPolicy": {"retentionPeriod": str(STATE.retention[bucket])}}
                if bucket in STATE.retention
                else {}
            ),
        }
    )


def _page_token(key, kind):
    raw = json.dumps([key, kind]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_page_token(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key, kind = json.loads(raw)
        return (str(key), int(kind))
    except Exception:
        raise bad_request("Invalid page token.")


def h_list(bucket, query):
    check_bucket(bucket)
    prefix = q1(query, "prefix", "")
    delimiter = q1(query, "delimiter", "")
    trailing = q1(query, "includeTrailingDelimiter", "false").lower() == "true"
    start_offset = q1(query, "startOffset")
    end_offset = q1(query, "endOffset")
    max_results = q_int(query, "maxResults")
    if max_results is None:
        max_results = 1000
    if max_results < 1:
        raise bad_request("Invalid value for maxResults: %d" % max_results)
    max_results = min(max_results, 1000)
    after = None
    token = q1(query, "pageToken")
    if token:
        after = _parse_page_token(token)

    names = STATE.objects.sorted_names(bucket)
    entries = _list_entries(
        names, prefix, delimiter, trailing, start_offset, end_offset, max_results + 1, after
    )
    page, more = entries[:max_results], len(entries) > max_results
    result = {"kind": "storage#objects"}
    items = [STATE.objects.resource(bucket, key) for key, kind in page if kind == 1]
    prefixes = [key for key, kind in page if kind == 0]
    if prefixes:
        result["prefixes"] = prefixes
    if items:
        result["items"] = items
    if more:
        result["nextPageToken"] = _page_token(*page[-1])
    fields = q1(query, "fields")
    if fields:
        result = _select_fields(result, _parse_fields(fields))
    return Reply.json(result)


def _parse_fields(spec):
    """GCS's partial-response syntax: ``a,b(c,d)`` gives
    ``{"a": None, "b": {"c": None, "d": None}}`` (None: the whole value)."""

    def parse(i):
        selected, name = {}, ""
        while i < len(spec):
            ch = spec[i]
            if ch == "(":
                selected[name.strip()], i = parse(i + 1)
                name = ""
                continue
            if ch in ",)":
                if name.strip():
                    selected[name.strip()] = None
                name = ""
                i += 1
                if ch == ")":
                    return selected, i
                continue
            name += ch
            i += 1
        if name.strip():
            selected[name.strip()] = None
        return selected, i

    return parse(0)[0]


def _select_fields(value, selected):
    """``value`` with only the ``selected`` fields (lists: of each element)."""
    if selected is None:
        return value
    if isinstance(value, list):
        return [_select_fields(v, selected) for v in value]
    if isinstance(value, dict):
        return {k: _select_fields(value[k], sub) for k, sub in selected.items() if k in value}
    return value


def _after_all_below(prefix):
    """The smallest string above every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _list_entries(names, prefix, delimiter, trailing, start_offset, end_offset, limit, after):
    """Up to ``limit`` listing entries ``(key, kind)`` (kind 0: a prefix, 1:
    an item) in GCS order, after the entry ``after``, from the sorted
    ``names``. Names below one prefix come one after another, so each
    prefix costs one binary search to skip what is below it."""
    lo = bisect.bisect_left(names, prefix)
    if start_offset is not None:
        lo = max(lo, bisect.bisect_left(names, start_offset))
    entries = []
    if after is not None:
        key, kind = after
        if delimiter and key.endswith(delimiter) and key.startswith(prefix) and len(key) > len(prefix):
            # a prefix (or its placeholder): everything below it was listed
            if kind == 0 and trailing:
                at = bisect.bisect_left(names, key)
                if at < len(names) and names[at] == key and lo <= at:
                    entries.append((key, 1))
            lo = max(lo, bisect.bisect_left(names, _after_all_below(key)))
        else:
            lo = max(lo, bisect.bisect_right(names, key))
    i = lo
    while i < len(names) and len(entries) < limit:
        name = names[i]
        if not name.startswith(prefix) or (end_offset is not None and name >= end_offset):
            break
        rest = name[len(prefix):]
        if delimiter and delimiter in rest:
            pfx = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            entries.append((pfx, 0))
            if trailing and name == pfx:
                entries.append((name, 1))
            i = bisect.bisect_left(names, _after_all_below(pfx), i + 1)
            continue
        entries.append((name, 1))
        i += 1
    return entries[:limit]


def _media_reply(obj, headers):
    data = obj.data
    r = obj.resource
    base = {
        "Content-Type": r.get("contentType", "application/octet-stream"),
        "x-goog-generation": r["generation"],
        "x-goog-metageneration": r["metageneration"],
        "x-goog-stored-content-length": str(len(data)),
        "x-goog-storage-class": r.get("storageClass", "STANDARD"),
        "ETag": '"%s"' % r["etag"],
        "Last-Modified": formatdate(obj.updated_epoch, usegmt=True),
        "Accept-Ranges": "bytes",
    }
    if r.get("contentEncoding"):
        base["x-goog-stored-content-encoding"] = r["contentEncoding"]
        base["Content-Encoding"] = r["contentEncoding"]
    rng = headers.get("Range")
    if rng:
        m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", rng)
        if m and (m.group(1) or m.group(2)):
            size = len(data)
            if m.group(1):
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else size - 1
            else:
                start = max(0, size - int(m.group(2)))
                end = size - 1
            end = min(end, size - 1)
            if start >= size or start > end:
                base["Content-Range"] = "bytes */%d" % size
                err = error_body(416, "Request range not satisfiable", "requestedRangeNotSatisfiable")
                base["Content-Type"] = "application/json; charset=UTF-8"
                return Reply(416, json.dumps(err).encode(), base)
            base["Content-Range"] = "bytes %d-%d/%d" % (start, end, size)
            return Reply(206, data[start : end + 1], base)
    # A composite object has no MD5 to announce.
    base["x-goog-hash"] = "crc32c=%s" % r["crc32c"] + (",md5=%s" % r["md5Hash"] if "md5Hash" in r else "")
    return Reply(200, data, base)


def h_object_get(bucket, name, query, headers, media=False):
    obj = live_object(bucket, name, query)
    try:
        check_preconditions(query, obj, not_modified=True)
    except NotModified:
        return Reply(304)
    if media or q1(query, "alt") == "media":
        return _media_reply(obj, headers)
    return Reply.json(obj.resource)


def h_object_patch(bucket, name, query, body):
    obj = live_object(bucket, name, query)
    check_preconditions(query, obj)
    obj.patch(json_body(body))
    return Reply.json(obj.resource)


def h_object_delete(bucket, name, query):
    obj = live_object(bucket, name, query)
    check_preconditions(query, obj)
    retention = STATE.retention.get(bucket)
    created = datetime.fromisoformat(obj.resource["timeCreated"].replace("Z", "+00:00")).timestamp()
    if retention is not None and time.time() - created < retention:
        raise HTTPError(403, "Object '%s/%s' is subject to bucket's retention policy." % (bucket, name), "retentionPolicyNotMet")
    del STATE.objects[(bucket, name)]
    return Reply(204)


def _props_for_copy(src, body):
    props = {k: v for k, v in src.resource.items() if k in WRITABLE}
    if body:
        # A destination resource in the body replaces the source's properties.
        props = {k: v for k, v in body.items() if k in WRITABLE}
        props.setdefault("contentType", src.resource.get("contentType"))
    return props


def h_rewrite(bucket, name, dbucket, dname, query, body, copy_only=False):
    check_bucket(dbucket)
    token = q1(query, "rewriteToken")
    src = live_object(bucket, name, query, gen_key="sourceGeneration")
    check_preconditions(query, src, prefix="ifSource")
    check_preconditions(query, STATE.objects.get((dbucket, dname)))
    dest_body = json_body(body)
    size = len(src.data)
    if not copy_only:
        if token:
            job = STATE.rewrites.get(token)
            if job is None or job["src"] != (bucket, name) or job["dst"] != (dbucket, dname):
                raise bad_request("Invalid rewrite token.")
            if job["generation"] != src.generation:
                raise bad_request("The source object changed during the rewrite.")
            del STATE.rewrites[token]
        elif size > REWRITE_CHUNK:
            token = uuid.uuid4().hex
            STATE.rewrites[token] = {
                "src": (bucket, name),
                "dst": (dbucket, dname),
                "generation": src.generation,
            }
            return Reply.json(
                {
                    "kind": "storage#rewriteResponse",
                    "totalBytesRewritten": str(REWRITE_CHUNK),
                    "objectSize": str(size),
                    "done": False,
                    "rewriteToken": token,
                }
            )
    dst = store_object(dbucket, dname, src.data, _props_for_copy(src, dest_body), query)
    if copy_only:
        return Reply.json(dst.resource)
    return Reply.json(
        {
            "kind": "storage#rewriteResponse",
            "totalBytesRewritten": str(size),
            "objectSize": str(size),
            "done": True,
            "resource": dst.resource,
        }
    )


def h_compose(bucket, name, query, body):
    request = json_body(body)
    sources = request.get("sourceObjects") or []
    if not 1 <= len(sources) <= 32:
        raise bad_request("The number of source components provided (%d) must be between 1 and 32." % len(sources))
    data = b""
    for source in sources:
        data += live_object(bucket, source.get("name", ""), {}).data
    destination = request.get("destination") or {}
    props = {k: v for k, v in destination.items() if k in WRITABLE and k != "md5Hash"}
    obj = store_object(bucket, name, data, props, query)
    del obj.resource["md5Hash"]
    obj.resource["componentCount"] = len(sources)
    return Reply.json(obj.resource)


def h_upload_post(bucket, query, headers, body, host):
    check_bucket(bucket)
    upload_type = q1(query, "uploadType")
    if upload_type == "media":
        props = {"contentType": headers.get("Content-Type") or "application/octet-stream"}
        if q1(query, "contentEncoding"):
            props["contentEncoding"] = q1(query, "contentEncoding")
        obj = store_object(bucket, q1(query, "name", ""), body, props, query)
        return Reply.json(obj.resource)
    if upload_type == "multipart":
        (h1, meta_raw), (h2, content) = parse_multipart(headers.get("Content-Type"), body)
        meta = json_body(meta_raw)
        name = q1(query, "name") or meta.get("name") or ""
        meta.setdefault("contentType", h2.get("content-type") or "application/octet-stream")
        obj = store_object(bucket, name, content, meta, query)
        return Reply.json(obj.resource)
    if upload_type == "resumable":
        if "upload_id" in query:
            return h_upload_put(query, headers, body)
        meta = json_body(body) if body else {}
        name = q1(query, "name") or meta.get("name") or ""
        if not name:
            raise bad_request("Object name is required.", "required")
        meta.setdefault(
            "contentType", headers.get("X-Upload-Content-Type") or "application/octet-stream"
        )
        check_preconditions(query, STATE.objects.get((bucket, name)))
        upload_id = uuid.uuid4().hex
        STATE.uploads[upload_id] = {
            "bucket": bucket,
            "name": name,
            "meta": meta,
            "query": {k: v for k, v in query.items() if k.startswith("if")},
            "data": bytearray(),
            "result": None,
        }
        location = "http://%s/upload/storage/v1/b/%s/o?uploadType=resumable&name=%s&upload_id=%s" % (
            host,
            quote(bucket, safe=""),
            quote(name, safe=""),
            upload_id,
        )
        return Reply(200, b"", {"Location": location, "X-GUploader-UploadID": upload_id})
    raise bad_request("Invalid uploadType: %r" % upload_type)


def _finish_upload(upload_id, session):
    obj = store_object(
        session["bucket"], session["name"], bytes(session["data"]), session["meta"], session["query"]
    )
    session["result"] = obj.resource
    return Reply.json(obj.resource)


def _incomplete(session):
    headers = {}
    if session["data"]:
        headers["Range"] = "bytes=0-%d" % (len(session["data"]) - 1)
    return Reply(308, b"", headers)


def h_upload_put(query, headers, body):
    upload_id = q1(query, "upload_id", "")
    session = STATE.uploads.get(upload_id)
    if session is None:
        raise not_found("No such upload session.")
    if session.get("cancelled"):
        raise HTTPError(499, "The upload was cancelled.", "clientClosedRequest")
    if session["result"] is not None:
        return Reply.json(session["result"])
    crange = (headers.get("Content-Range") or "").strip()
    data = session["data"]
    if not crange:
        data[:] = body
        return _finish_upload(upload_id, session)
    m = re.fullmatch(r"bytes \*/(\d+|\*)", crange)
    if m:
        if body:
            raise bad_request("Content-Range bytes */N with a body")
        total = m.group(1)
        if total != "*" and int(total) == len(data):
            return _finish_upload(upload_id, session)
        if total != "*" and int(total) < len(data):
            raise bad_request("total %s smaller than the %d bytes received" % (total, len(data)))
        return _incomplete(session)
    m = re.fullmatch(r"bytes (\d+)-(\d+)/(\d+|\*)", crange)
    if not m:
        raise bad_request("Invalid Content-Range: %r" % crange)
    start, end, total = int(m.group(1)), int(m.group(2)), m.group(3)
    if end < start or end - start + 1 != len(body):
        raise bad_request("Content-Range %r does not match a body of %d bytes" % (crange, len(body)))
    if start > len(data):
        raise bad_request(
            "Invalid request: chunk starts at %d but only %d bytes were received" % (start, len(data))
        )
    data.extend(body[len(data) - start :])
    if total != "*":
        total = int(total)
        if len(data) > total:
            raise bad_request("More bytes received than the declared total %d" % total)
        if len(data) == total:
            return _finish_upload(upload_id, session)
    return _incomplete(session)


def h_upload_delete(query):
    session = STATE.uploads.get(q1(query, "upload_id", ""))
    if session is None:
        raise not_found("No such upload session.")
    session["cancelled"] = True
    return Reply.json(error_body(499, "Client Closed Request", "clientClosedRequest"), status=499)


# --- routing ----------------------------------------------------------------

SEG = r"([^/]+)"
ROUTES = [
    ("GET", re.compile(r"/storage/v1/b/%s" % SEG), "bucket_get"),
    ("GET", re.compile(r"/storage/v1/b/%s/o" % SEG), "list"),
    ("POST", re.compile(r"/storage/v1/b/%s/o/(.+)/compose" % SEG), "compose"),
    ("POST", re.compile(r"/storage/v1/b/%s/o/(.+?)/rewriteTo/b/%s/o/(.+)" % (SEG, SEG)), "rewrite"),
    ("POST", re.compile(r"/storage/v1/b/%s/o/(.+?)/copyTo/b/%s/o/(.+)" % (SEG, SEG)), "copy"),
    ("GET", re.compile(r"/storage/v1/b/%s/o/(.+)" % SEG), "get"),
    ("PATCH", re.compile(r"/storage/v1/b/%s/o/(.+)" % SEG), "patch"),
    ("DELETE", re.compile(r"/storage/v1/b/%s/o/(.+)" % SEG), "delete"),
    ("GET", re.compile(r"/download/storage/v1/b/%s/o/(.+)" % SEG), "download"),
    ("POST", re.compile(r"/upload/storage/v1/b/%s/o" % SEG), "upload_post"),
    ("PUT", re.compile(r"/upload/storage/v1/b/%s/o" % SEG), "upload_put"),
    ("DELETE", re.compile(r"/upload/storage/v1/b/%s/o" % SEG), "upload_delete"),
]


def dispatch(method, path, query, headers, body, host):
    for rmethod, regex, kind in ROUTES:
        m = regex.fullmatch(path)
        if not m:
            continue
        if rmethod != method:
            continue
        g = [unquote(x) for x in m.groups()]
        if kind == "bucket_get":
            return h_bucket_get(g[0], query)
        if kind == "list":
            return h_list(g[0], query)
        if kind == "compose":
            return h_compose(g[0], g[1], query, body)
        if kind == "rewrite":
            return h_rewrite(g[0], g[1], g[2], g[3], query, body)
        if kind == "copy":
            return h_rewrite(g[0], g[1], g[2], g[3], query, body, copy_only=True)
        if kind == "get":
            return h_object_get(g[0], g[1], query, headers)
        if kind == "download":
            return h_object_get(g[0], g[1], query, headers, media=True)
        if kind == "patch":
            return h_object_patch(g[0], g[1], query, body)
        if kind == "delete":
            return h_object_delete(g[0], g[1], query)
        if kind == "upload_post":
            return h_upload_post(g[0], query, headers, body, host)
        if kind == "upload_put":
            return h_upload_put(query, headers, body)
        if kind == "upload_delete":
            return h_upload_delete(query)
    raise HTTPError(404, "Not Found: %s %s" % (method, path), "notFound")


# --- control endpoints ------------------------------------------------------

FAULT_ACTIONS = ("status", "cut_after_bytes", "stall_seconds", "drop")


def control(method, path, body):
    if path == "/_faults" and method == "POST":
        spec = json.loads(body or b"{}")
        specs = spec if isinstance(spec, list) else [spec]
        for f in specs:
            actions = [a for a in FAULT_ACTIONS if f.get(a) not in (None, False)]
            if len(actions) != 1:
                return Reply.json({"error": "exactly one of %s" % (FAULT_ACTIONS,)}, 400)
            f = dict(f)
            f["count"] = int(f.get("count", 1))
            if f["count"] < 1:
                return Reply.json({"error": "count must be >= 1"}, 400)
        with STATE.lock:
            for f in specs:
                f = dict(f)
                f["count"] = int(f.get("count", 1))
                STATE.faults.append(f)
            pending = len(STATE.faults)
        return Reply.json({"ok": True, "pending": pending})
    if path == "/_faults" and method == "GET":
        with STATE.lock:
            return Reply.json(list(STATE.faults))
    if path == "/_seed" and method == "POST":
        # Many small objects at once, without a request each (benchmarks):
        # {"bucket": B, "prefix": P, "dirs": D, "files": F} makes
        # P + "dNNNNN/fNNNNN" for D directories of F files (D = 0: P +
        # "fNNNNN", F files directly under P); all hold SEED_DATA.
        spec = json.loads(body or b"{}")
        bucket, prefix = spec["bucket"], spec.get("prefix", "")
        dirs, files = int(spec.get("dirs", 0)), int(spec["files"])
        if dirs:
            names = ("%sd%05d/f%05d" % (prefix, d, f) for d in range(dirs) for f in range(files))
        else:
            names = ("%sf%05d" % (prefix, f) for f in range(files))
        with STATE.lock:
            STATE.objects.seed(bucket, names, STATE.new_generation)
            count = len(STATE.objects.seeded)
        return Reply.json({"ok": True, "seeded": count})
    if path == "/_retention" and method == "POST":
        spec = json.loads(body or b"{}")
        with STATE.lock:
            if spec.get("seconds") is None:
                STATE.retention.pop(spec["bucket"], None)
            else:
                STATE.retention[spec["bucket"]] = int(spec["seconds"])
        return Reply.json({"ok": True})
    if path == "/_reset" and method == "POST":
        with STATE.lock:
            STATE.reset()
        return Reply.json({"ok": True})
    if path == "/_requests" and method == "GET":
        with STATE.lock:
            return Reply.json(list(STATE.requests))
    if path == "/_requests/clear" and method == "POST":
        with STATE.lock:
            STATE.requests.clear()
        return Reply.json({"ok": True})
    return Reply.json({"error": "unknown control %s %s" % (method, path)}, 404)


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


def main():
    args = loopback_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    serve(args.host, args.port, Handler)


if __name__ == "__main__":
    main()
