"""A service people connect through the gateway (issue 66), run by scripts/mcp-tests.sh: an OAuth 2.0
authorization server and the API it protects, built on Authlib's authorization server (Flask).

It stands where GitHub or Google Drive would: the gateway is its confidential OAuth client
(`portcullis`, client_secret_basic or client_secret_post), and gets a person's tokens by the
authorization code grant with PKCE (S256 required), then refreshes them (the refresh token
rotates: the old one is revoked). Its people sign in on its own page, in the person's browser.

- GET  /oauth/authorize   the sign-in and consent page (`#approve` approves as the named person)
- POST /oauth/authorize   Authlib issues the code and sends the browser back to the gateway
- POST /oauth/token       Authlib's token endpoint: authorization_code, refresh_token
- POST /oauth/revoke      Authlib's revocation endpoint (RFC 7009)
- GET  /api/me            the API, Authlib's bearer token check: the person's own documents
- GET  /observed          what a test reads: the tokens issued and the API calls answered (no token values)

Run: oauth_service.py PORT SECRET_FILE
"""
import html
import os
import secrets
import sys
import time

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # loopback http, in a test only

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector, current_token
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.models import AuthorizationCodeMixin, ClientMixin, TokenMixin
from authlib.oauth2.rfc6750 import BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib_pkce import S256Required
from flask import Flask, jsonify, request

PORT = int(sys.argv[1])
with open(sys.argv[2]) as f:
    CLIENT_SECRET = f.read().strip()
SCOPES = {"documents.read"}
DOCUMENTS = {
    "alice-docs": ["Quarterly plan", "Alice's notes"],
    "bob-docs": ["Bob's drafts"],
}
CODES, TOKENS, OBSERVED = {}, [], {"issued": 0, "refreshed": 0, "revoked": 0, "api": []}


class Client(ClientMixin):
    client_id = "portcullis"

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri):
        # The gateway's connect callback, on whichever loopback port the test gave it.
        return redirect_uri.startswith("http://127.0.0.1:") and redirect_uri.endswith("/.portcullis/connect/callback")

    def check_client_secret(self, client_secret):
        return secrets.compare_digest(client_secret, CLIENT_SECRET)

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in ("authorization_code", "refresh_token")


CLIENT = Client()


class Code(AuthorizationCodeMixin):
    def __init__(self, code, user, redirect_uri, scope, challenge, method):
        self.code, self.user, self.redirect_uri, self.scope = code, user, redirect_uri, scope
        self.code_challenge, self.code_challenge_method, self.issued = challenge, method, time.time()

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


class Token(TokenMixin):
    def __init__(self, values, user):
        self.access_token, self.refresh_token = values["access_token"], values.get("refresh_token")
        self.scope, self.expires_in, self.issued, self.user, self.revoked = values.get("scope", ""), values["expires_in"], time.time(), user, False

    def check_client(self, client):
        return client.get_client_id() == CLIENT.client_id

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return time.time() > self.issued + self.expires_in

    def is_revoked(self):
        return self.revoked


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def save_authorization_code(self, code, request):
        CODES[code] = Code(code, request.user, request.payload.redirect_uri, request.payload.scope,
                           request.payload.data.get("code_challenge"), request.payload.data.get("code_challenge_method"))

    def query_authorization_code(self, code, client):
        found = CODES.get(code)
        return found if found and time.time() - found.issued < 60 else None

    def delete_authorization_code(self, authorization_code):
        CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        for token in TOKENS:
            if token.refresh_token == refresh_token and not token.revoked:
                return token
        return None

    def authenticate_user(self, refresh_token):
        return refresh_token.user

    def revoke_old_credential(self, refresh_token):
        refresh_token.revoked = True
        OBSERVED["refreshed"] += 1


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def query_token(self, token_string, token_type_hint):
        for token in TOKENS:
            if token_string in (token.access_token, token.refresh_token):
                return token
        return None

    def revoke_token(self, token, request):
        token.revoked = True
        OBSERVED["revoked"] += 1


def save_token(values, request):
    TOKENS.append(Token(values, request.user))
    OBSERVED["issued"] += 1


app = Flask(__name__)
app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"authorization_code": 3600, "refresh_token": 3600}
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
server = AuthorizationServer(app, query_client=lambda client_id: CLIENT if client_id == CLIENT.client_id else None, save_token=save_token)
server.register_grant(CodeGrant, [S256Required(required=True)])
server.register_grant(RefreshGrant)
server.register_endpoint(Revocation)


class Validator(BearerTokenValidator):
    def authenticate_token(self, token_string):
        for token in TOKENS:
            if token.access_token == token_string:
                return token
        return None


require_oauth = ResourceProtector()
require_oauth.register_token_validator(Validator())


@app.get("/oauth/authorize")
def authorize_page():
    # The service's own sign-in and consent, in the person's browser: who they are here, and Approve.
    grant = server.get_consent_grant(end_user=None)
    scope = html.escape(grant.request.payload.scope or "")
    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in request.args.items())
    return (f"<!doctype html><title>Acme Docs</title><h1>Acme Docs</h1><p>Portcullis asks to read your documents ({scope}).</p>"
            f'<form method="post" action="/oauth/authorize">{hidden}<label>Your Acme Docs name <input name="username" value="alice-docs"></label>'
            '<button id="approve" type="submit">Approve</button></form>')


@app.post("/oauth/authorize")
def authorize():
    user = request.form.get("username", "")
    return server.create_authorization_response(grant_user=user if user in DOCUMENTS else None)


@app.post("/oauth/token")
def token():
    return server.create_token_response()


@app.post("/oauth/revoke")
def revoke():
    return server.create_endpoint_response(Revocation.ENDPOINT_NAME)


@app.get("/api/me")
@require_oauth("documents.read")
def me():
    user = current_token.user
    OBSERVED["api"].append(user)
    return jsonify({"user": user, "documents": DOCUMENTS[user]})


@app.get("/observed")
def observed():
    return jsonify(OBSERVED)


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=PORT, threaded=True)
