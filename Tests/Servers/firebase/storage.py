"""Storage's v0 API: metadata, download tokens, listing, downloads,
uploads (multipart and resumable sessions)."""

import base64
import json
import uuid
from urllib.parse import quote

import fake_gcs as gcs
from firebase.rules import require


TOKEN_KEY = "firebaseStorageDownloadTokens"
GRANULARITY = 256 * 1024


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
