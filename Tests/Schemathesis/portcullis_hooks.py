"""schemathesis hooks for scripts/schemathesis.sh.

A fresh access token for the user `alice` at most a second old on every request:
the run calls POST /api/auth/logout, which revokes the token it presents, so one
token for the whole run would turn every later authenticated request into a 401.
The token is set in the Authorization header only (never in a URL).
"""
import os
import re

import requests
import schemathesis

BASE = os.environ["PORTCULLIS_URL"]


@schemathesis.auth(refresh_interval=1)
class FreshAccessToken:
    def get(self, case, context):
        answer = requests.post(
            BASE + "/api/auth/login",
            json={"username": "alice", "password": os.environ["PORTCULLIS_PASSWORD"]},
            timeout=10,
        )
        answer.raise_for_status()
        return answer.json()["access_token"]

    def set(self, case, data, context):
        case.headers = case.headers or {}
        case.headers["Authorization"] = f"Bearer {data}"


@schemathesis.hook
def map_body(context, body):
    """A login that follows a link (it names a session) uses alice's real credentials, so the
    stateful phase goes create-anonymous -> read -> login -> read -> refresh / logout."""
    if context.operation.path == "/api/auth/login" and isinstance(body, dict) and str(body.get("session_id", "")).startswith("ses_"):
        body = dict(body)
        body["username"] = "alice"
        body["password"] = os.environ["PORTCULLIS_PASSWORD"]
    return body


JWT = re.compile(rb"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
TOKEN_ISSUERS = {("POST", "/api/auth/login"), ("POST", "/api/auth/refresh")}


@schemathesis.check
def no_secret_in_answer(ctx, response, case):
    """No answer carries a token, a refresh token or the password unless it is the login or
    refresh answer that hands them out."""
    body = response.content or b""
    if os.environ["PORTCULLIS_PASSWORD"].encode() in body:
        raise AssertionError("an answer contains the password")
    if (case.method.upper(), case.path) not in TOKEN_ISSUERS and (JWT.search(body) or b'"rt_' in body):
        raise AssertionError("an answer other than login or refresh contains a token")
    return None
