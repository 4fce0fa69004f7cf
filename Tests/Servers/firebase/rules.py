"""Who is asking (the Authorization header) and the security rules."""

import time

import fake_gcs as gcs
from firebase.auth import Config, jwt_payload


# --- who is asking --------------------------------------------------------------


def caller(headers):
    """'admin', a uid, or None (no credentials). A bad or expired token
    is 401."""
    value = (headers.get("Authorization") or "").strip()
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme not in ("Firebase", "Bearer") or not token:
        raise gcs.HTTPError(401, "Invalid Authorization header.", "unauthorized")
    if token == "owner":
        return "admin"
    try:
        claims = jwt_payload(token)
    except (ValueError, UnicodeDecodeError):
        raise gcs.HTTPError(401, "Invalid Firebase ID token: not a JWT.", "unauthorized")
    if claims.get("aud") != Config.project or claims.get("iss") != (
        "https://securetoken.google.com/%s" % Config.project
    ):
        raise gcs.HTTPError(401, "Firebase ID token has the wrong audience or issuer.", "unauthorized")
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)) or exp <= time.time():
        raise gcs.HTTPError(
            401,
            "Firebase ID token has expired. Get a fresh ID token from your client app and try again.",
            "unauthorized",
        )
    uid = claims.get("user_id")
    if not isinstance(uid, str) or not uid:
        raise gcs.HTTPError(401, "Firebase ID token has no user_id.", "unauthorized")
    return uid


def permitted(op, path, who, bucket=""):
    """The rules (see the module docstring). op: get, list or write."""
    if who == "admin":
        return True
    if bucket.startswith("signed-in"):
        return who is not None
    segments = path.split("/")
    if segments[0] == "users" and len(segments) >= 2 and segments[1]:
        return who is not None and who == segments[1]
    if segments[0] == "public":
        return op in ("get", "list") or who is not None
    return False


def require(op, path, who, bucket=""):
    if not permitted(op, path, who, bucket):
        word = {"get": "READ", "list": "LIST", "write": "WRITE"}[op]
        raise gcs.HTTPError(403, "Permission denied. No %s permission." % word, "forbidden")
