"""The GCS API routes and their dispatch."""

import re
from urllib.parse import unquote

from fakegcs.base import HTTPError
from fakegcs.listing import h_bucket_get, h_list
from fakegcs.rewrite import h_compose, h_rewrite
from fakegcs.objects import h_object_delete, h_object_get, h_object_patch
from fakegcs.uploads import h_upload_delete, h_upload_post, h_upload_put


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
