"""Uploads: media, multipart and resumable sessions."""

import re
import uuid
from urllib.parse import quote

from fakegcs.base import HTTPError, Reply, bad_request, error_body, not_found
from fakegcs.state import STATE
from fakegcs.objects import check_bucket, check_preconditions, json_body, parse_multipart, q1, store_object


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
