#!/usr/bin/env python3
"""Runs gcp-storage-emulator 2026.7.19 in-process, with its limits lifted.

The emulator (pinned in scripts/setup.sh) is imported from the venv and its
Storage and request router are reused as they are; this file only replaces
the HTTP server around them and patches a few functions. The fixes:

1. Concurrency. The emulator serves with ``http.server.HTTPServer``: one
   request at a time, so a client that leaves one response unread while it
   sends another request deadlocks it. Here a ``ThreadingHTTPServer`` (daemon
   threads, larger listen backlog) accepts and reads connections in parallel.
   The emulator's Storage is not thread-safe, so one global lock serialises
   the *handler execution* only: request bodies are read before taking the
   lock, and what a handler writes is kept by reference under the lock and
   written to the socket after releasing it (``_Pieces``: no copy), so a
   slow or stalled client never holds the lock.
2. Keep-alive. ``protocol_version = "HTTP/1.1"`` (the emulator's handler
   uses BaseHTTPRequestHandler's default HTTP/1.0 and closes every
   connection). This is safe because the emulator's ``Response.close`` always
   sends Content-Length, and because the request body (Content-Length or
   chunked) is always read completely here before dispatch, even for routes
   that never look at it. A handler that raises gets a 500 JSON answer with
   Content-Length instead of a dropped connection.
3. PATCH merge semantics of GCS. The emulator's ``_patch_object`` replaces
   the whole ``metadata`` map and ignores JSON nulls. Here: keys of the
   patch's ``metadata`` map are set, keys whose value is null are deleted,
   other keys are untouched, ``"metadata": null`` clears the map (an empty map
   is omitted, as GCS does); a writable top-level property set to null is
   deleted. The merged map is a fresh dict (the emulator shares the source's
   dict with copies/rewrites, so an in-place merge would change both).
   A PATCH also refreshes ``updated``. Properties deleted this way read as
   None inside the emulator (its copy/rewrite code indexes contentType). Objects created with metadata (e.g.
   multipart uploads, copies) keep ``metageneration`` "1" (the emulator's
   create path went through the patch code and made it "2").
4. In-memory speed. With ``--in-memory`` the emulator still serialises all
   bucket/object metadata to a ".meta" file in its store
   (``Storage._write_config_to_file`` in storage.py) after every write, so
   each upload costs O(number of objects). In memory mode nothing ever reads
   that file back, so the method is a no-op there.
5. Media uploads. An empty-body ``uploadType=media`` upload crashed
   (``len(None)``); it now stores an empty object. The body of a media upload
   (and of an XML-API PUT) is also always taken as raw bytes: the emulator
   parsed an ``application/json`` or ``multipart/*`` body as JSON/MIME even
   for media uploads, storing the wrong content.
6. Resumable status. A 308 for a session that has received nothing said
   ``Range: bytes=0-0``; it now has no Range header, as on GCS.
7. Generation-pinned downloads. The emulator ignored ``generation=`` on
   media downloads and served whatever object is live, so a reader pinned to
   a generation could get another version's bytes. A download naming a
   generation that is not the live one now answers 404, as GCS does for a
   generation that no longer exists.
8. ``includeTrailingDelimiter``. The emulator ignored it; with it, an
   object whose name is one of the listed prefixes (a ``dir/`` placeholder)
   is also returned as an item, as GCS does.
9. ``X-GUploader-No-308: yes``. Google's Go API client (and so rclone) sends
   this header on resumable chunks and treats a bare 308 as an error: GCS
   then answers "resume incomplete" as 200 with
   ``X-Http-Status-Code-Override: 308``. The emulator always sent 308, so
   every rclone upload larger than one chunk failed. Now a request with that
   header gets the 200 form; without it, the 308 is unchanged.
10. UTF-8 names in multipart uploads. The emulator read the JSON part of a
   ``multipart/related`` upload as text through the email package, which
   replaced every non-ASCII byte with U+FFFD: an object named ``naïve.txt``
   was stored as ``na\ufffd\ufffdve.txt``. The part's bytes are now
   decoded as the UTF-8 JSON they are.
11. Paging. The emulator ignored ``maxResults`` and ``pageToken`` and sent
   every object of a listing in one answer. Here a listing answers at most
   ``maxResults`` entries (default and limit 1,000, as GCS; prefixes and
   items both count, in name order) with a ``nextPageToken`` when more
   remain, so clients page as they must against GCS (a listing of 2,000
   objects takes two requests). The token is opaque (base64 of the last
   entry).
12. Multipart speed. The emulator parsed every ``multipart/related`` upload
   body with Python's ``email`` package, which took about four times the
   CPU of the same object as a media upload (measured: 300 uploads of 4 KiB,
   0.61 s of emulator CPU against 0.14 s), so a client that sends metadata
   with its bytes (every filesystem upload does) met a slower server than
   curl's media POSTs. Here such a body is split at its boundary directly
   (metadata part as JSON, content part raw, or base64 if so marked); any
   body that does not have exactly that shape still goes to the email
   parser (its JSON part still read as UTF-8, as in 10).
13. Resumable appends. The emulator kept a resumable session's bytes as one
   ``bytes`` object and rebuilt it on every chunk (``content += chunk``), so
   a 256 MiB upload in 64 MiB chunks copied 640 MiB, and a 1 GiB one 8.5
   GiB, before the object existed: a cost GCS does not have, which made
   every streamed upload slower than a single media POST of the same
   bytes. Here each session appends to a ``bytearray`` (the received
   count, status queries and completion are unchanged).
14. Chunked bodies cut short. The emulator's chunked reader takes the end
   of the stream for the last chunk, so a single-request upload whose
   client went away mid-body (bucketfs cuts its streamed request when the
   file stops being written in order) stored the bytes received so far as
   the object. GCS stores nothing for an incomplete request. Here the body
   is read first (see 2), and one that ends before its zero-size chunk
   is dropped with the connection, never dispatched.

Also: ``--request-log PATH`` appends one line per request,
``METHOD<TAB>PATH<TAB>QUERY<TAB>RANGE`` (path and query exactly as sent,
query empty if none; RANGE the Range header, empty if none), written and flushed before the request is handled; the emulator's
own logging is silenced; ``READY <port>`` is printed on stdout once
listening. Unexpected handler exceptions go to stderr.

Usage: emulator_wrapper.py [--host 127.0.0.1] [--port 0] [--in-memory]
       [--default-bucket NAME ...] [--request-log PATH] [--data-dir DIR]
"""

import argparse
import base64
import copy
import gzip
import io
import json
import logging
import os
import signal
import sys
import threading
import traceback
import zlib
from datetime import datetime, timezone
from email.parser import BytesParser
from functools import partial
from http import HTTPStatus
from http.server import ThreadingHTTPServer

from gcp_storage_emulator import server as emu_server
from gcp_storage_emulator import storage as emu_storage
from gcp_storage_emulator.handlers import buckets as emu_buckets
from gcp_storage_emulator.handlers import objects as emu_objects

STORAGE_LOCK = threading.Lock()


# --- 3. PATCH merge semantics -------------------------------------------------

_orig_make_object_resource = emu_objects._make_object_resource


def _now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _patch_object(obj, patch):
    """GCS objects.patch semantics for the emulator's writable fields."""
    if not patch or not isinstance(patch, dict):
        return obj
    obj["metageneration"] = str(int(obj.get("metageneration") or "1") + 1)
    for key in emu_objects._WRITABLE_FIELDS:
        if key not in patch:
            continue
        val = patch[key]
        if val is None:
            obj.pop(key, None)
            continue
        if key == "metadata":
            merged = dict(obj.get("metadata") or {})
            if isinstance(val, dict):
                for mkey, mval in val.items():
                    if mval is None:
                        merged.pop(mkey, None)
                    else:
                        merged[mkey] = mval
            if merged:
                obj["metadata"] = merged
            else:
                obj.pop("metadata", None)
        elif key == "customTime" and obj.get(key) and obj.get(key) > val:
            continue
        elif key == "acl":
            obj[key] = emu_objects._normalize_object_acl_entries(
                obj.get("bucket"), obj.get("name"), val
            )
        else:
            obj[key] = copy.deepcopy(val)
    return obj


def _make_object_resource(
    base_url, bucket_name, object_name, content_type, content_length, metadata=None
):
    # Creation keeps the emulator's rule that nulls are ignored (copies pass
    # the whole source resource, whose contentType may be null).
    if isinstance(metadata, dict):
        metadata = {k: v for k, v in metadata.items() if v is not None}
        if isinstance(metadata.get("metadata"), dict):
            metadata["metadata"] = {
                k: v for k, v in metadata["metadata"].items() if v is not None
            }
    obj = _orig_make_object_resource(
        base_url, bucket_name, object_name, content_type, content_length, metadata
    )
    # A new object is metageneration 1 whatever metadata it was created with.
    obj["metageneration"] = "1"
    return obj


class _Resource(dict):
    """An object resource whose deleted writable properties read as None.

    The emulator's copy/rewrite/compose read e.g. ``obj["contentType"]``,
    which a PATCH with ``"contentType": null`` now deletes.
    """

    def __missing__(self, key):
        if key in emu_objects._WRITABLE_FIELDS:
            return None
        raise KeyError(key)


def _patch(storage, bucket_name, object_id, metadata):
    try:
        obj = _Resource(storage.get_file_obj(bucket_name, object_id))
    except emu_objects.NotFound:
        return None
    _patch_object(obj, metadata)
    if metadata:
        obj["updated"] = _now_rfc3339()
    storage.patch_object(bucket_name, object_id, obj)
    return obj


emu_objects._patch_object = _patch_object
emu_objects._make_object_resource = _make_object_resource
emu_objects._patch = _patch


def _resumable_incomplete(response, storage, upload_id, fallback_end=0):
    # The emulator answered "Range: bytes=0-0" (one byte received) when
    # nothing was received yet; GCS omits Range then.
    response.status = emu_objects.GoogleHTTPStatus.RESUME_INCOMPLETE
    # 9. the client asked for the 200 form (see the top of this file)
    if response._handler.headers.get("X-GUploader-No-308", "").lower() == "yes":
        response.status = HTTPStatus.OK
        response["X-Http-Status-Code-Override"] = "308"
    received = storage.get_resumable_byte_count(upload_id)
    if received > 0:
        response["Range"] = "bytes=0-{}".format(received - 1)


emu_objects._resumable_incomplete = _resumable_incomplete


# --- 4. no per-write metadata dump in memory mode ----------------------------

_orig_write_config = emu_storage.Storage._write_config_to_file


def _write_config_to_file(self):
    if self._use_memory_fs:
        return
    _orig_write_config(self)


emu_storage.Storage._write_config_to_file = _write_config_to_file


# --- 5. media uploads take the raw body --------------------------------------


def _raw_body(request):
    raw = request._request_handler.rfile.getvalue()
    encoding = request.get_header("Content-Encoding")
    if raw and encoding == "gzip":
        raw = gzip.decompress(raw)
    elif raw and encoding == "deflate":
        raw = zlib.decompress(raw)
    return raw


_orig_insert = emu_objects.insert
_orig_xml_upload = emu_objects.xml_upload


def _insert(request, response, storage, *args, **kwargs):
    upload_type = (request.query.get("uploadType") or [None])[0]
    if upload_type == "media":
        request._data = _raw_body(request)
    return _orig_insert(request, response, storage, *args, **kwargs)


def _xml_upload(request, response, storage, *args, **kwargs):
    request._data = _raw_body(request)
    return _orig_xml_upload(request, response, storage, *args, **kwargs)


# --- 7. downloads honour generation= -----------------------------------------

_orig_download = emu_objects.download


def _download(request, response, storage, *args, **kwargs):
    wanted = (request.query.get("generation") or [None])[0]
    if wanted is not None:
        try:
            live = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
        except Exception:  # the emulator's NotFound: let it answer as usual
            live = None
        if live is not None and str(live.get("generation")) != str(wanted):
            response.status = emu_objects.HTTPStatus.NOT_FOUND
            response.json({"error": {"code": 404, "message": "No such object generation: " + str(wanted)}})
            return None
    return _orig_download(request, response, storage, *args, **kwargs)


# --- 8. list honours includeTrailingDelimiter ---------------------------------

_orig_ls = emu_objects.ls


def _ls(request, response, storage, *args, **kwargs):
    result = _orig_ls(request, response, storage, *args, **kwargs)
    if response.status != emu_objects.HTTPStatus.OK:
        return result
    listing = json.loads(response._content)
    items = listing.get("items") or []
    wanted = (request.query.get("includeTrailingDelimiter") or ["false"])[0].lower() == "true"
    if wanted and request.query.get("delimiter"):
        for prefix in listing.get("prefixes") or []:
            try:
                items.append(storage.get_file_obj(request.params["bucket_name"], prefix))
            except Exception:  # no placeholder object for this prefix
                pass
    response.json(_page(listing.get("prefixes") or [], items, request.query))
    return result


# --- 11. paging ---------------------------------------------------------------

PAGE_LIMIT = 1000


def _page(prefixes, items, query):
    """One page of a listing, GCS style: entries (prefixes and items) in
    name order, a prefix before an item of the same name."""
    try:
        limit = int((query.get("maxResults") or [PAGE_LIMIT])[0])
    except ValueError:
        limit = PAGE_LIMIT
    limit = max(1, min(limit, PAGE_LIMIT))
    entries = sorted([(p, 0, p) for p in prefixes] + [(o.get("name") or "", 1, o) for o in items],
                     key=lambda e: (e[0], e[1]))
    token = (query.get("pageToken") or [None])[0]
    if token:
        try:
            after = tuple(json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))))
        except Exception:
            after = None
        if after is not None:
            entries = [e for e in entries if (e[0], e[1]) > (after[0], after[1])]
    page = entries[:limit]
    listing = {"kind": "storage#objects"}
    listing["prefixes"] = [e[2] for e in page if e[1] == 0]
    listing["items"] = [e[2] for e in page if e[1] == 1]
    if len(entries) > limit:
        last = page[-1]
        listing["nextPageToken"] = base64.urlsafe_b64encode(json.dumps([last[0], last[1]]).encode()).decode().rstrip("=")
    return listing


emu_objects.insert = _insert  # the router's no-/upload fallback looks it up
emu_objects.xml_upload = _xml_upload
emu_objects.download = _download  # objects.get(alt=media) looks it up too
emu_objects.ls = _ls
for _regex, _methods in emu_server.HANDLERS:
    for _method, _func in list(_methods.items()):
        if _func is _orig_insert:
            _methods[_method] = _insert
        elif _func is _orig_xml_upload:
            _methods[_method] = _xml_upload
        elif _func is _orig_download:
            _methods[_method] = _download
        elif _func is _orig_ls:
            _methods[_method] = _ls


# --- 10./12. multipart uploads: UTF-8 metadata, no email parser -------------

_orig_read_data = emu_server._read_data
_PLAIN_ENCODINGS = ("", "binary", "8bit", "7bit")


def _split_multipart(raw, content_type):
    """{"meta", "content", "content-type"} of a two-part multipart/related
    upload body, or None if it is not exactly that."""
    boundary = None
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value.strip().strip('"')
    if not boundary:
        return None
    delimiter = b"--" + boundary.encode()
    if not raw.startswith(delimiter):
        at = raw.find(b"\r\n" + delimiter)
        if at < 0:
            return None
        raw = raw[at + 2:]
    parts = []
    for chunk in raw.split(b"\r\n" + delimiter):
        if chunk.startswith(delimiter):
            chunk = chunk[len(delimiter):]
        if chunk.startswith(b"--"):
            break
        head, sep, body = chunk.partition(b"\r\n\r\n")
        if not sep:
            return None
        headers = {}
        for line in head.split(b"\r\n"):
            name, colon, value = line.partition(b":")
            if colon:
                headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        parts.append((headers, body))
    if len(parts) != 2:
        return None
    (_, meta), (headers, content) = parts
    encoding = headers.get("content-transfer-encoding", "").lower()
    if encoding == "base64":
        content = base64.b64decode(content)
    elif encoding not in _PLAIN_ENCODINGS:
        return None
    kind = headers.get("content-type", "text/plain").split(";")[0].strip().lower() or "text/plain"
    return {"meta": json.loads(meta or b"{}"), "content": content, "content-type": kind}


def _read_data(request_handler, query):
    content_type = request_handler.headers.get("Content-Type") or ""
    if not content_type.startswith("multipart/related"):
        return _orig_read_data(request_handler, query)
    raw = emu_server._decode_raw_data(emu_server._read_raw_data(request_handler), request_handler)
    if not raw:
        return None
    try:
        fast = _split_multipart(raw, content_type)
    except (ValueError, UnicodeDecodeError):
        fast = None
    if fast is not None:
        return fast
    # Not the usual shape: the email package, with the JSON part decoded
    # from its bytes as UTF-8 (JSON's encoding): the emulator took the
    # email package's text of it, which turns every non-ASCII byte into
    # U+FFFD, so `naïve.txt` was stored under a garbled name.
    header = ("Content-Type:" + content_type + "\r\n").encode("utf-8")
    payload = BytesParser().parsebytes(header + raw).get_payload()
    return {
        "meta": json.loads(payload[0].get_payload(decode=True)),
        "content": payload[1].get_payload(decode=True),
        "content-type": payload[1].get_content_type(),
    }


emu_server._read_data = _read_data  # Request looks it up at call time


# --- 13. resumable sessions append in place -----------------------------------

_RESUMABLE_BUFFERS = {}  # upload id -> bytearray of the bytes received so far
_orig_resumable_byte_count = emu_storage.Storage.get_resumable_byte_count


def _add_to_resumable_upload(self, file_id, content, total_size=None, expected_start=None):
    buffer = _RESUMABLE_BUFFERS.get(file_id)
    if buffer is None:
        try:
            buffer = bytearray(self.get_file(emu_storage.RESUMABLE_DIR, self.safe_id(file_id), False))
        except emu_storage.NotFound:
            buffer = bytearray()
        _RESUMABLE_BUFFERS[file_id] = buffer
    if expected_start is not None and expected_start != len(buffer):
        raise emu_storage.BadRequest(
            "Invalid Content-Range start: expected {}, got {}".format(len(buffer), expected_start)
        )
    buffer += content or b""
    if total_size is None or len(buffer) < total_size:
        return None
    del _RESUMABLE_BUFFERS[file_id]
    return bytes(memoryview(buffer)[:total_size])


def _get_resumable_byte_count(self, file_id):
    buffer = _RESUMABLE_BUFFERS.get(file_id)
    return len(buffer) if buffer is not None else _orig_resumable_byte_count(self, file_id)


emu_storage.Storage.add_to_resumable_upload = _add_to_resumable_upload
emu_storage.Storage.get_resumable_byte_count = _get_resumable_byte_count


# --- 1./2. threaded HTTP/1.1 server ------------------------------------------


class _RequestLog:
    def __init__(self, path):
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8") if path else None

    def write(self, method, raw_path, byte_range=""):
        if self._file is None:
            return
        path, _, query = raw_path.partition("?")
        line = "{}\t{}\t{}\t{}\n".format(method, path, query, byte_range)
        with self._lock:
            self._file.write(line)
            self._file.flush()


class _Pieces:
    """What a handler writes, kept by reference (no copy) under the lock and
    sent after it. The emulator writes the headers, then the body as one
    ``bytes`` (a whole object, or a slice for a range): rendering that into
    a BytesIO and copying it out again cost two copies of every download on
    top of the socket write (256 MiB went out at ~280 MiB/s)."""

    def __init__(self):
        self._pieces = []

    def write(self, data):
        self._pieces.append(data)
        return len(data)

    def flush(self):
        pass

    def clear(self):
        self._pieces = []

    def send_to(self, wfile):
        for piece in self._pieces:
            # large pieces go out in slices of a memoryview (no copy)
            view = memoryview(piece)
            for start in range(0, len(view), 1 << 20):
                wfile.write(view[start:start + (1 << 20)])
        wfile.flush()


class FixedRequestHandler(emu_server.RequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def __init__(self, storage, request_log, *args, **kwargs):
        self.request_log = request_log
        super().__init__(storage, *args, **kwargs)

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length:
            return self.rfile.read(int(length))
        te = self.headers.get("Transfer-Encoding")
        if te and te.lower() == "chunked":
            # A body that ends before its last chunk (RFC 9112 section 7.1:
            # the zero-size chunk) is a client that went away mid-body, as
            # a single-request upload cut short is: None, and nothing is
            # stored (the emulator's own reader takes such a body for whole).
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                if not line.strip():
                    return None
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    # trailers up to the blank line
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    return None
                chunks.append(chunk)
                self.rfile.readline(65537)
            return b"".join(chunks)
        return b""

    def _dispatch(self, method):
        try:
            body = self._read_body()
        except ValueError:  # a chunk size that is not hex
            body = None
        if body is None or len(body) != int(self.headers.get("Content-Length") or len(body)):
            self.close_connection = True  # client went away mid-body
            return
        # The emulator re-reads the body from rfile/headers: give it exactly
        # the bytes we read, with a matching Content-Length.
        del self.headers["Transfer-Encoding"]
        del self.headers["Content-Length"]
        self.headers["Content-Length"] = str(len(body))
        self.request_log.write(method, self.path, self.headers.get("Range", ""))

        sock_rfile, sock_wfile = self.rfile, self.wfile
        out = _Pieces()
        self.rfile, self.wfile = io.BytesIO(body), out
        try:
            with STORAGE_LOCK:
                try:
                    emu_server.Router(self).handle(method)
                except Exception:
                    traceback.print_exc(file=sys.stderr)
                    self._headers_buffer = []
                    out.clear()
                    err = json.dumps(
                        {"error": {"code": 500, "message": "emulator handler failed"}}
                    ).encode()
                    self.send_response(500)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(err)))
                    self.end_headers()
                    out.write(err)
        finally:
            self.rfile, self.wfile = sock_rfile, sock_wfile
        out.send_to(self.wfile)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def log_message(self, format, *args):  # noqa: A002 - silence access log
        pass


class FixedServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        # Connection resets by clients (tests cut connections on purpose)
        # are not worth a traceback.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--default-bucket", action="append", default=[])
    parser.add_argument("--request-log", default=None)
    parser.add_argument("--data-dir", default=None, help="disk mode storage root")
    args = parser.parse_args()

    logging.disable(logging.CRITICAL)

    data_dir = os.path.abspath(args.data_dir) if args.data_dir else None
    storage = emu_storage.Storage(use_memory_fs=args.in_memory, data_dir=data_dir)
    for name in args.default_bucket:
        emu_buckets.create_bucket(name, storage)

    request_log = _RequestLog(args.request_log)
    httpd = FixedServer(
        (args.host, args.port), partial(FixedRequestHandler, storage, request_log)
    )

    def _stop(signum, frame):
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    print("READY {}".format(httpd.server_address[1]), flush=True)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
