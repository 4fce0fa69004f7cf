"""Constants, checksums (CRC32C, MD5), GCS-shaped errors and the Reply type."""

import base64
import hashlib
import json
from datetime import datetime, timezone


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


def _crc32c_table_driven(data, crc=0):
    table = _CRC_TABLE
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:
    # Google's own CRC32C (C; scripts/setup.sh installs google-crc32c into
    # the venv the tests run this server with). The loop above takes
    # 0.12 s per MiB in CPython on an idle machine, and the server computes
    # it under its one lock for every object it stores: the parts and the
    # composite of a parallel upload's 16 MiB, on a loaded test run, held
    # every other test's request past the clients' 10 s stall timeout, so
    # they were sent again and request counts came out one high.
    import google_crc32c

    def crc32c(data, crc=0):
        return google_crc32c.extend(crc, bytes(data))

except ImportError:  # a bare python3 without the venv: correct, slower
    crc32c = _crc32c_table_driven


def b64_crc32c(data):
    return base64.b64encode(crc32c(data).to_bytes(4, "big")).decode()


def b64_md5(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


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
