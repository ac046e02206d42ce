"""schemathesis hooks for scripts/schemathesis.sh.

A fresh access token for the user `alice` at most a second old on every request:
the run calls POST /api/auth/logout, which revokes the token it presents, so one
token for the whole run would turn every later authenticated request into a 401.
The token is set in the Authorization header only (never in a URL).
"""
import os

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
