"""objects.rewrite/copyTo and objects.compose."""

import uuid

from fakegcs.base import REWRITE_CHUNK, Reply, WRITABLE, bad_request
from fakegcs.state import STATE
from fakegcs.objects import check_bucket, check_preconditions, json_body, live_object, q1, store_object


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
