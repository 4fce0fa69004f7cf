"""The in-memory store: object resources, generations, seeded objects, the
sorted object table, and the server's State (sessions, faults, request log)."""

import base64
import threading
import time
from datetime import datetime
from urllib.parse import quote

from fakegcs.base import WRITABLE, b64_crc32c, b64_md5, bad_request, now_rfc3339


# --- state ------------------------------------------------------------------


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
