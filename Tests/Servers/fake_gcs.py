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
import os
import sys

# The server lives in the fakegcs package next to this script, one module
# per job; this script runs it and re-exports its names for the servers
# built on it (firebase_emulator.py, fault_proxy.py import fake_gcs).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fakegcs.base import (  # noqa: E402,F401
    REWRITE_CHUNK,
    WRITABLE,
    _crc32c_table,
    _CRC_TABLE,
    crc32c,
    b64_crc32c,
    b64_md5,
    now_rfc3339,
    HTTPError,
    error_body,
    not_found,
    bad_request,
    PRECONDITION_MESSAGE,
    precondition_failed,
    NotModified,
    Reply,
)
from fakegcs.state import (  # noqa: E402,F401
    new_resource,
    Obj,
    Seeded,
    SEED_DATA,
    seeded_resource,
    ObjectTable,
    State,
    STATE,
    SEED_MD5,
    SEED_CRC32C,
)
from fakegcs.objects import (  # noqa: E402,F401
    check_bucket,
    q1,
    q_int,
    no_such_object,
    live_object,
    check_preconditions,
    store_object,
    json_body,
    parse_multipart,
    _media_reply,
    h_object_get,
    h_object_patch,
    h_object_delete,
)
from fakegcs.listing import (  # noqa: E402,F401
    h_bucket_get,
    _page_token,
    _parse_page_token,
    h_list,
    _parse_fields,
    _select_fields,
    _after_all_below,
    _list_entries,
)
from fakegcs.rewrite import (  # noqa: E402,F401
    _props_for_copy,
    h_rewrite,
    h_compose,
)
from fakegcs.uploads import (  # noqa: E402,F401
    h_upload_post,
    _finish_upload,
    _incomplete,
    h_upload_put,
    h_upload_delete,
)
from fakegcs.routing import (  # noqa: E402,F401
    SEG,
    ROUTES,
    dispatch,
)
from fakegcs.control import (  # noqa: E402,F401
    FAULT_ACTIONS,
    control,
)
from fakegcs.handler import (  # noqa: E402,F401
    Handler,
    Server,
    loopback_arguments,
    serve,
)


def main():
    args = loopback_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    serve(args.host, args.port, Handler)


if __name__ == "__main__":
    main()
