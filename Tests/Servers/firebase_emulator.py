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
import os
import sys

# The server lives in the firebase package next to this script (auth, rules,
# storage, handler); it is built on fake_gcs.py, found the same way.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_gcs as gcs  # noqa: E402
from firebase.auth import Config  # noqa: E402
from firebase.handler import Handler  # noqa: E402


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
