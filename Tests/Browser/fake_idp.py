"""An OpenID Connect provider on loopback for the browser suite (started by scripts/browser-tests.sh).

The code flow with PKCE as a provider runs it: discovery, a JWKS (one ES256 key made at start),
a login page whose button approves, the redirect back with `code`, `state` and `iss`, a token
endpoint that checks client_secret_basic, the redirect URI and the PKCE verifier and returns an
ID token (with the flow's nonce and a `sid`) and a refresh token, and an end-session page.

As a company's provider under enterprise-managed authorization: `POST /test/id-token` signs the
person in as an agent would (an ID token for the client `ci-agent`), and its token endpoint
exchanges that ID token (RFC 8693, `requested_token_type` id-jag, the agent authenticating with
`client_secret_post`, its secret in `CI_AGENT_SECRET_FILE`) for an Identity Assertion JWT
Authorization Grant (`typ` oauth-id-jag+jwt) for the `audience` and `resource` asked, with the
scopes asked.

For the tests: `POST /test/backchannel-logout` makes it send a back-channel logout token for the
last signed-in `sid` to the gateway's back-channel logout URI, and answers the gateway's status.

Run: fake_idp.py PORT CLIENT_SECRET_FILE BACKCHANNEL_URI. Prints nothing secret.
"""
import base64
import hashlib
import json
import os
import ssl
import secrets
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

PORT = int(sys.argv[1])
CLIENT_ID = "portcullis"
CLIENT_SECRET = open(sys.argv[2]).read().strip()
BACKCHANNEL_URI = sys.argv[3]
ISSUER = f"http://127.0.0.1:{PORT}"
KEY = ec.generate_private_key(ec.SECP256R1())
KID = "fake-idp-1"
LOCK = threading.Lock()
CODES = {}  # code -> (redirect_uri, challenge, nonce, sid)
STATE = {"last_sid": None, "refresh": {}, "agent_id_tokens": set(), "access_tokens": set()}
AGENT_ID = "ci-agent"
AGENT_SECRET = open(os.environ["CI_AGENT_SECRET_FILE"]).read().strip() if os.environ.get("CI_AGENT_SECRET_FILE") else None
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(claims, typ="JWT"):
    header = {"alg": "ES256", "kid": KID, "typ": typ}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    r, s = decode_dss_signature(KEY.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def jwks():
    numbers = KEY.public_key().public_numbers()
    return {"keys": [{"kty": "EC", "crv": "P-256", "kid": KID, "use": "sig", "alg": "ES256",
                      "x": b64url(numbers.x.to_bytes(32, "big")), "y": b64url(numbers.y.to_bytes(32, "big"))}]}


def id_token(sid, nonce=None):
    now = int(time.time())
    claims = {"iss": ISSUER, "sub": "browser-sso-user", "aud": CLIENT_ID, "iat": now, "exp": now + 300, "sid": sid, "email": "sso@example.com", "email_verified": True}
    if nonce:
        claims["nonce"] = nonce
    return sign(claims)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass  # the URLs carry codes and states

    def _send(self, status, body=b"", content_type="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status, value):
        self._send(status, json.dumps(value).encode())

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/.well-known/openid-configuration":
            self._json(200, {"issuer": ISSUER, "jwks_uri": ISSUER + "/jwks", "authorization_endpoint": ISSUER + "/auth",
                             "token_endpoint": ISSUER + "/token", "end_session_endpoint": ISSUER + "/logout",
                             "backchannel_logout_supported": True, "authorization_response_iss_parameter_supported": True})
        elif url.path == "/jwks":
            self._json(200, jwks())
        elif url.path == "/auth":
            hidden = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in
                             ((urllib.parse.quote(k), urllib.parse.quote(v, safe="")) for k, v in query.items()))
            page = f'<!doctype html><title>Fake IdP</title><h1>Fake IdP</h1><form method="get" action="/auth/approve">{hidden}' \
                   f'<button id="approve" type="submit">Sign in as browser-sso-user</button></form>'
            self._send(200, page.encode(), "text/html; charset=utf-8")
        elif url.path == "/auth/approve":
            query = {k: urllib.parse.unquote(v) for k, v in query.items()}
            if query.get("code_challenge_method") != "S256" or query.get("client_id") != CLIENT_ID:
                self._send(400, b"bad request", "text/plain")
                return
            code, sid = secrets.token_urlsafe(24), "sid-" + secrets.token_hex(8)
            with LOCK:
                CODES[code] = (query["redirect_uri"], query["code_challenge"], query["nonce"], sid)
            back = query["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": query["state"], "iss": ISSUER})
            self._send(302, b"", "text/plain", [("Location", back)])
        elif url.path == "/logout":
            back = query.get("post_logout_redirect_uri", "")
            page = f'<!doctype html><title>Signed out</title><h1 id="signed-out">Signed out of the Fake IdP</h1><a href="{back}">back</a>'
            self._send(200, page.encode(), "text/html; charset=utf-8")
        else:
            self._send(404, b"{}")

    def _id_jag(self, form):
        """RFC 8693 at the provider: the agent's ID token for an ID-JAG naming the authorization server and resource."""
        if AGENT_SECRET is None or form.get("client_id") != AGENT_ID or form.get("client_secret") != AGENT_SECRET:
            self._json(401, {"error": "invalid_client"})
            return
        with LOCK:
            known = form.get("subject_token") in STATE["agent_id_tokens"]
        if not known or form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token" or \
                form.get("requested_token_type") != ID_JAG_TYPE or not form.get("audience") or not form.get("resource"):
            self._json(400, {"error": "invalid_request"})
            return
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": "browser-sso-user", "aud": form["audience"], "client_id": AGENT_ID, "jti": secrets.token_hex(16),
                  "iat": now, "exp": now + 300, "resource": form["resource"], "email": "sso@example.com", "email_verified": True}
        if form.get("scope"):
            claims["scope"] = form["scope"]
        self._json(200, {"access_token": sign(claims, typ="oauth-id-jag+jwt"), "issued_token_type": ID_JAG_TYPE, "token_type": "N_A", "expires_in": 300})

    def _exchange_access(self, form):
        """RFC 8693 for the gateway: the person's access token from their sign-in for one for an API's audience."""
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self._json(401, {"error": "invalid_client"})
            return
        with LOCK:
            known = form.get("subject_token") in STATE["access_tokens"]
        if not known:
            self._json(400, {"error": "invalid_grant"})
            return
        if form.get("requested_token_type") != "urn:ietf:params:oauth:token-type:access_token" or not form.get("audience"):
            self._json(400, {"error": "invalid_request"})
            return
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": "browser-sso-user", "aud": form["audience"], "scope": form.get("scope", ""), "act": {"sub": CLIENT_ID},
                  "iat": now, "exp": now + 300, "jti": secrets.token_hex(16)}
        self._json(200, {"access_token": sign(claims, typ="at+jwt"), "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                         "token_type": "Bearer", "expires_in": 300})

    def _access_token(self):
        """An access token for the gateway's sign-in, remembered: the subject of a later exchange."""
        token = secrets.token_urlsafe(16)
        with LOCK:
            STATE["access_tokens"].add(token)
        return token

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0)).decode()
        form = dict(urllib.parse.parse_qsl(body))
        if url.path == "/token" and form.get("grant_type") == TOKEN_EXCHANGE and \
                form.get("subject_token_type") == "urn:ietf:params:oauth:token-type:access_token":
            self._exchange_access(form)
        elif url.path == "/token" and form.get("grant_type") == TOKEN_EXCHANGE:
            self._id_jag(form)
        elif url.path == "/test/id-token":
            now = int(time.time())
            token = sign({"iss": ISSUER, "sub": "browser-sso-user", "aud": AGENT_ID, "iat": now, "exp": now + 300,
                          "email": "sso@example.com", "email_verified": True})
            with LOCK:
                STATE["agent_id_tokens"].add(token)
            self._json(200, {"id_token": token})
        elif url.path == "/token":
            expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                self._json(401, {"error": "invalid_client"})
                return
            if form.get("grant_type") == "authorization_code":
                with LOCK:
                    issued = CODES.pop(form.get("code", ""), None)
                if not issued or form.get("redirect_uri") != issued[0] or \
                        b64url(hashlib.sha256(form.get("code_verifier", "").encode()).digest()) != issued[1]:
                    self._json(400, {"error": "invalid_grant"})
                    return
                sid = issued[3]
                refresh = secrets.token_urlsafe(24)
                with LOCK:
                    STATE["last_sid"] = sid
                    STATE["refresh"][refresh] = sid
                self._json(200, {"access_token": self._access_token(), "token_type": "Bearer", "expires_in": 300,
                                 "id_token": id_token(sid, issued[2]), "refresh_token": refresh})
            elif form.get("grant_type") == "refresh_token":
                with LOCK:
                    sid = STATE["refresh"].pop(form.get("refresh_token", ""), None)
                    refresh = secrets.token_urlsafe(24)
                    if sid:
                        STATE["refresh"][refresh] = sid
                if not sid:
                    self._json(400, {"error": "invalid_grant"})
                    return
                self._json(200, {"access_token": self._access_token(), "token_type": "Bearer", "expires_in": 300,
                                 "id_token": id_token(sid), "refresh_token": refresh})
            else:
                self._json(400, {"error": "unsupported_grant_type"})
        elif url.path == "/test/backchannel-logout":
            with LOCK:
                sid = STATE["last_sid"]
            now = int(time.time())
            token = sign({"iss": ISSUER, "aud": CLIENT_ID, "iat": now, "exp": now + 120, "jti": secrets.token_hex(16), "sid": sid,
                          "events": {"http://schemas.openid.net/event/backchannel-logout": {}}}, typ="logout+jwt")
            # `?to=URL`: another gateway's back-channel logout URI (the ones behind nginx and Caddy).
            target = dict(urllib.parse.parse_qsl(url.query)).get("to", BACKCHANNEL_URI)
            request = urllib.request.Request(target, data=urllib.parse.urlencode({"logout_token": token}).encode(), method="POST")
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
            # FAKE_IDP_INSECURE_TLS=1: the gateway on loopback with the test's self-signed certificate.
            context = ssl._create_unverified_context() if os.environ.get("FAKE_IDP_INSECURE_TLS") == "1" else None
            try:
                with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                    status = answer.status
            except urllib.error.HTTPError as error:
                status = error.code
            self._json(200, {"gateway_status": status})
        else:
            self._send(404, b"{}")


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
