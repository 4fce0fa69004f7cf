"""The Auth emulator: configuration, accounts, ID tokens and the sign-in endpoints."""

import base64
import json
import re
import secrets
import time
from urllib.parse import parse_qs

import fake_gcs as gcs


class Config:
    project = "demo-bucketfs"
    api_key = "fake-api-key"
    token_lifetime = 3600


# --- Auth ---------------------------------------------------------------------


class Accounts:
    """Users and refresh tokens. Guarded by gcs.STATE.lock (routes run
    with it held; controls take it)."""

    def __init__(self):
        self.users = {}  # localId -> dict
        self.refresh = {}  # refresh token -> localId
        self.lifetimes = {}  # localId -> seconds

    def by_email(self, email):
        for user in self.users.values():
            if user.get("email") == email:
                return user
        return None

    def create(self, provider, email=None, password=None, local_id=None):
        local_id = local_id or "".join(
            secrets.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            for _ in range(28)
        )
        user = {"localId": local_id, "provider": provider, "disabled": False, "createdAt": time.time()}
        if email is not None:
            user["email"] = email
            user["password"] = password
        self.users[local_id] = user
        return user


ACCOUNTS = Accounts()
REQUESTS = []  # storage and auth requests with who made them


def b64url(data):
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_payload(token):
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a JWT")
    payload = json.loads(b64url_decode(parts[1]))
    if not isinstance(payload, dict):
        raise ValueError("JWT payload is not an object")
    return payload


def auth_error(message, code=400, status="INVALID_ARGUMENT"):
    err = gcs.HTTPError(code, message, "invalid")
    err.status = status
    return err


def issue_tokens(user):
    """A fresh ID token and a new refresh token for `user`."""
    now = int(time.time())
    lifetime = ACCOUNTS.lifetimes.get(user["localId"], Config.token_lifetime)
    claims = {
        "iss": "https://securetoken.google.com/%s" % Config.project,
        "aud": Config.project,
        "auth_time": now,
        "user_id": user["localId"],
        "sub": user["localId"],
        "iat": now,
        "exp": now + lifetime,
        "firebase": {"identities": {}, "sign_in_provider": user["provider"]},
    }
    if user.get("email"):
        claims["email"] = user["email"]
        claims["email_verified"] = False
        claims["firebase"]["identities"] = {"email": [user["email"]]}
    header = {"alg": "none", "typ": "JWT"}
    id_token = "%s.%s." % (
        b64url(json.dumps(header).encode()),
        b64url(json.dumps(claims).encode()),
    )
    refresh = b64url(secrets.token_bytes(48))
    ACCOUNTS.refresh[refresh] = user["localId"]
    return id_token, refresh, lifetime


def sign_in_reply(user, kind, extra=None):
    id_token, refresh, lifetime = issue_tokens(user)
    body = {
        "kind": kind,
        "localId": user["localId"],
        "idToken": id_token,
        "refreshToken": refresh,
        "expiresIn": str(lifetime),
    }
    if user.get("email"):
        body["email"] = user["email"]
    body.update(extra or {})
    return gcs.Reply.json(body)


def check_api_key(query):
    key = gcs.q1(query, "key")
    if not key:
        raise auth_error(
            "The request is missing a valid API key.", code=403, status="PERMISSION_DENIED"
        )
    if key != Config.api_key:
        raise auth_error("API key not valid. Please pass a valid API key.")


def request_fields(headers, body):
    if "application/x-www-form-urlencoded" in (headers.get("Content-Type") or ""):
        return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
    return gcs.json_body(body)


def h_sign_up(body):
    email, password = body.get("email"), body.get("password")
    if email is None and password is None:
        return sign_in_reply(ACCOUNTS.create("anonymous"), "identitytoolkit#SignupNewUserResponse")
    if not email or not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
        raise auth_error("INVALID_EMAIL" if email else "MISSING_EMAIL")
    if not password:
        raise auth_error("MISSING_PASSWORD")
    if len(password) < 6:
        raise auth_error("WEAK_PASSWORD : Password should be at least 6 characters")
    if ACCOUNTS.by_email(email.lower()):
        raise auth_error("EMAIL_EXISTS")
    user = ACCOUNTS.create("password", email.lower(), password)
    return sign_in_reply(user, "identitytoolkit#SignupNewUserResponse")


def h_sign_in_password(body):
    email, password = body.get("email"), body.get("password")
    if not email:
        raise auth_error("INVALID_EMAIL")
    if not password:
        raise auth_error("MISSING_PASSWORD")
    user = ACCOUNTS.by_email(email.lower())
    if user is None:
        raise auth_error("EMAIL_NOT_FOUND")
    if user.get("password") != password:
        raise auth_error("INVALID_PASSWORD")
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    return sign_in_reply(user, "identitytoolkit#VerifyPasswordResponse", {"registered": True})


def h_sign_in_custom_token(body):
    token = body.get("token")
    if not token:
        raise auth_error("MISSING_CUSTOM_TOKEN")
    try:
        claims = jwt_payload(token)
    except (ValueError, UnicodeDecodeError):
        raise auth_error("INVALID_CUSTOM_TOKEN : Invalid assertion format.")
    uid = claims.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > 128:
        raise auth_error("INVALID_CUSTOM_TOKEN : Custom token is missing a valid uid.")
    exp = claims.get("exp")
    if isinstance(exp, (int, float)) and exp < time.time():
        raise auth_error("INVALID_CUSTOM_TOKEN : Custom token has expired.")
    user = ACCOUNTS.users.get(uid)
    is_new = user is None
    if is_new:
        user = ACCOUNTS.create("custom", local_id=uid)
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    return sign_in_reply(user, "identitytoolkit#VerifyCustomTokenResponse", {"isNewUser": is_new})


def h_secure_token(fields):
    if fields.get("grant_type") != "refresh_token":
        raise auth_error("INVALID_GRANT_TYPE")
    refresh = fields.get("refresh_token")
    if not refresh:
        raise auth_error("MISSING_REFRESH_TOKEN")
    local_id = ACCOUNTS.refresh.get(refresh)
    if local_id is None:
        raise auth_error("INVALID_REFRESH_TOKEN")
    user = ACCOUNTS.users.get(local_id)
    if user is None:
        raise auth_error("USER_NOT_FOUND")
    if user["disabled"]:
        raise auth_error("USER_DISABLED")
    id_token, new_refresh, lifetime = issue_tokens(user)
    # The refresh token stays the same for the session, as in production.
    del ACCOUNTS.refresh[new_refresh]
    return gcs.Reply.json(
        {
            "access_token": id_token,
            "expires_in": str(lifetime),
            "token_type": "Bearer",
            "refresh_token": refresh,
            "id_token": id_token,
            "user_id": local_id,
            "project_id": Config.project,
        }
    )
