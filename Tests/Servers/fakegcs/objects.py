"""Object helpers (preconditions, storing, request bodies) and the object
get/download/patch/delete handlers."""

import json
import re
import time
from datetime import datetime
from email.utils import formatdate

from fakegcs.base import HTTPError, NotModified, Reply, b64_crc32c, b64_md5, bad_request, error_body, not_found, precondition_failed
from fakegcs.state import Obj, STATE


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
