"""The company's identity provider for scripts/mcp-tests.sh (issue 66), built on Authlib's
authorization server (Flask): what Entra ID, Okta or Keycloak would be.

- The gateway signs people in here (OpenID Connect, the authorization code grant with PKCE S256,
  `client_secret_basic`): Authlib's code grant with its OpenID Connect extension (an ES256 ID token
  with the flow's nonce and a `sid`) and its RFC 9207 `iss` on the way back; its refresh grant
  rotates the refresh token.
- Token exchange (RFC 8693; Authlib has no grant for it, so it is an Authlib grant class here, with
  Authlib's client authentication and request parsing):
  - the gateway (`client_secret_basic`) exchanges a person's access token from their sign-in for
    an access token to an API's `audience` (`at+jwt`, with `act` naming the gateway);
  - the agent `ci-agent` (`client_secret_post`, its secret in `CI_AGENT_SECRET_FILE`) exchanges the
    person's ID token (`POST /test/id-token` signs the person in as an agent would) for an
    Identity Assertion JWT Authorization Grant, signed by Authlib's `IDJAGGrant.sign`
    (`typ` oauth-id-jag+jwt) for the `audience` and `resource` asked, with the scopes asked.
- `GET /logout`: the end-session page. `POST /test/backchannel-logout[?to=URI]`: sends a
  back-channel logout token for the last sign-in's `sid` to the gateway and answers its status.

Run: company_idp.py PORT CLIENT_SECRET_FILE BACKCHANNEL_URI. Prints nothing secret.
"""
import html
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")  # loopback http, in a test only

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.drafts.id_jag import IDJAGGrant
from authlib.oauth2.rfc6749 import BaseGrant, InvalidClientError, InvalidGrantError, InvalidRequestError, TokenEndpointMixin, grants
from authlib.oauth2.rfc6749.models import ClientMixin
from authlib.oauth2.rfc9207 import IssuerParameter
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from authlib.oidc.core.models import AuthorizationCodeMixin
from authlib_pkce import S256Required
from flask import Flask, jsonify, request
from joserfc import jwt
from joserfc.jwk import ECKey

PORT = int(sys.argv[1])
with open(sys.argv[2]) as f:
    GATEWAY_SECRET = f.read().strip()
BACKCHANNEL_URI = sys.argv[3]
AGENT_SECRET = open(os.environ["CI_AGENT_SECRET_FILE"]).read().strip() if os.environ.get("CI_AGENT_SECRET_FILE") else None
ISSUER = f"http://127.0.0.1:{PORT}"
PERSON = "browser-sso-user"
KID = "company-idp-1"
KEY = ECKey.generate_key("P-256", parameters={"kid": KID, "alg": "ES256", "use": "sig"}, private=True)
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
LOCK = threading.Lock()
CODES, TOKENS = {}, []
STATE = {"last_sid": None, "agent_id_tokens": set()}


def sign(claims, typ="JWT"):
    return jwt.encode({"alg": "ES256", "kid": KID, "typ": typ}, claims, KEY)


class Client(ClientMixin):
    def __init__(self, client_id, secret, auth_method, grant_types):
        self.client_id, self.secret, self.auth_method, self.grant_types = client_id, secret, auth_method, grant_types

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        # The gateway's sign-in callback, on whichever loopback port the test gave it.
        return redirect_uri.startswith("http://127.0.0.1:") and redirect_uri.endswith("/api/auth/oidc/callback")

    def check_client_secret(self, client_secret):
        return self.secret is not None and secrets.compare_digest(client_secret, self.secret)

    def check_endpoint_auth_method(self, method, endpoint):
        return method == self.auth_method

    def check_response_type(self, response_type):
        return response_type == "code" and "authorization_code" in self.grant_types

    def check_grant_type(self, grant_type):
        return grant_type in self.grant_types


CLIENTS = {
    "portcullis": Client("portcullis", GATEWAY_SECRET, "client_secret_basic", {"authorization_code", "refresh_token", TOKEN_EXCHANGE}),
    "ci-agent": Client("ci-agent", AGENT_SECRET, "client_secret_post", {TOKEN_EXCHANGE}),
}


class Code(AuthorizationCodeMixin):
    def __init__(self, code, user, payload):
        self.code, self.user, self.redirect_uri, self.scope = code, user, payload.redirect_uri, payload.scope
        self.nonce, self.issued = payload.data.get("nonce"), time.time()
        self.code_challenge, self.code_challenge_method = payload.data.get("code_challenge"), payload.data.get("code_challenge_method")

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return int(self.issued)


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic"]

    def save_authorization_code(self, code, request):
        with LOCK:
            CODES[code] = Code(code, request.user, request.payload)

    def query_authorization_code(self, code, client):
        with LOCK:
            found = CODES.get(code)
        return found if found and time.time() - found.issued < 60 else None

    def delete_authorization_code(self, authorization_code):
        with LOCK:
            CODES.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class IDToken(OpenIDCode):
    """The ID token: ES256 under the provider's key, for the gateway, with the sign-in's `sid`."""

    def resolve_client_private_key(self, client):
        return KEY

    def get_client_algorithm(self, client):
        return "ES256"

    def get_encode_header(self, client):
        return {"alg": "ES256", "kid": KID}

    def get_client_claims(self, client):
        return {"iss": ISSUER, "aud": client.get_client_id(), "exp": int(time.time()) + 300}

    def exists_nonce(self, nonce, request):
        return False  # each flow's nonce is the gateway's own, checked by the gateway

    def generate_user_info(self, user, scope):
        return UserInfo(sub=user["sub"], sid=user["sid"], email="sso@example.com", email_verified=True)


class RefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        with LOCK:
            return next((t for t in TOKENS if t["refresh_token"] == refresh_token and not t["revoked"]), None)

    def authenticate_user(self, refresh_token):
        return refresh_token["user"]

    def revoke_old_credential(self, refresh_token):
        refresh_token["revoked"] = True


class TokenExchangeGrant(BaseGrant, TokenEndpointMixin):
    """RFC 8693 at the provider, in Authlib's grant shape: its client authentication, its errors."""

    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE):
            raise InvalidClientError()
        self.request.client = client
        form = self.request.form
        subject, subject_type = form.get("subject_token"), form.get("subject_token_type")
        if not subject or not form.get("audience"):
            raise InvalidRequestError("subject_token and audience are required")
        if client.client_id == "ci-agent":
            with LOCK:
                known = subject in STATE["agent_id_tokens"]
            if subject_type != ID_TOKEN_TYPE or form.get("requested_token_type") != ID_JAG_TYPE or not form.get("resource"):
                raise InvalidRequestError("an ID token for an id-jag naming a resource")
        else:
            with LOCK:
                known = any(t["access_token"] == subject and not t["revoked"] for t in TOKENS)
            if subject_type != ACCESS_TOKEN_TYPE or form.get("requested_token_type", ACCESS_TOKEN_TYPE) != ACCESS_TOKEN_TYPE:
                raise InvalidRequestError("an access token for an access token")
        if not known:
            raise InvalidGrantError("the subject token is not one this provider issued")

    def create_token_response(self):
        form, client, now = self.request.form, self.request.client, int(time.time())
        if client.client_id == "ci-agent":
            claims = {"resource": form["resource"], "email": "sso@example.com", "email_verified": True}
            if form.get("scope"):
                claims["scope"] = form["scope"]
            assertion = IDJAGGrant.sign(KEY, ISSUER, form["audience"], PERSON, "ci-agent", issued_at=now, expires_at=now + 300, claims=claims,
                                        alg="ES256", header={"kid": KID})
            return 200, {"access_token": assertion, "issued_token_type": ID_JAG_TYPE, "token_type": "N_A", "expires_in": 300}, self.TOKEN_RESPONSE_HEADER
        claims = {"iss": ISSUER, "sub": PERSON, "aud": form["audience"], "scope": form.get("scope", ""), "act": {"sub": client.client_id},
                  "iat": now, "exp": now + 300, "jti": secrets.token_hex(16)}
        return 200, {"access_token": sign(claims, typ="at+jwt"), "issued_token_type": ACCESS_TOKEN_TYPE, "token_type": "Bearer",
                     "expires_in": 300}, self.TOKEN_RESPONSE_HEADER


class Issuer(IssuerParameter):
    def get_issuer(self):
        return ISSUER


def save_token(values, request):
    with LOCK:
        TOKENS.append({**values, "user": request.user, "revoked": False})
        if request.user:
            STATE["last_sid"] = request.user["sid"]


app = Flask(__name__)
app.config["OAUTH2_TOKEN_EXPIRES_IN"] = {"authorization_code": 300, "refresh_token": 300}
app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
server = AuthorizationServer(app, query_client=CLIENTS.get, save_token=save_token)
server.register_grant(CodeGrant, [S256Required(required=True), IDToken(require_nonce=True)])
server.register_grant(RefreshGrant)
server.register_grant(TokenExchangeGrant)
server.register_extension(Issuer())


@app.get("/.well-known/openid-configuration")
def discovery():
    return jsonify({"issuer": ISSUER, "jwks_uri": ISSUER + "/jwks", "authorization_endpoint": ISSUER + "/auth", "token_endpoint": ISSUER + "/token",
                    "end_session_endpoint": ISSUER + "/logout", "backchannel_logout_supported": True,
                    "authorization_response_iss_parameter_supported": True, "code_challenge_methods_supported": ["S256"],
                    "grant_types_supported": ["authorization_code", "refresh_token", TOKEN_EXCHANGE]})


@app.get("/jwks")
def jwks():
    return jsonify({"keys": [KEY.as_dict(private=False)]})


@app.get("/auth")
def authorize_page():
    # The company's sign-in, in the person's browser: one button signs them in.
    server.get_consent_grant(end_user=None)
    hidden = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in request.args.items())
    return (f'<!doctype html><title>Company IdP</title><h1>Company IdP</h1><form method="post" action="/auth">{hidden}'
            f'<button id="approve" type="submit">Sign in as {PERSON}</button></form>')


@app.post("/auth")
def authorize():
    return server.create_authorization_response(grant_user={"sub": PERSON, "sid": "sid-" + secrets.token_hex(8)})


@app.post("/token")
def token():
    return server.create_token_response()


@app.post("/test/id-token")
def agent_id_token():
    now = int(time.time())
    token = sign({"iss": ISSUER, "sub": PERSON, "aud": "ci-agent", "iat": now, "exp": now + 300, "email": "sso@example.com", "email_verified": True})
    with LOCK:
        STATE["agent_id_tokens"].add(token)
    return jsonify({"id_token": token})


@app.get("/logout")
def logout():
    back = html.escape(request.args.get("post_logout_redirect_uri", ""))
    return f'<!doctype html><title>Signed out</title><h1 id="signed-out">Signed out of the Company IdP</h1><a href="{back}">back</a>'


@app.post("/test/backchannel-logout")
def backchannel_logout():
    with LOCK:
        sid = STATE["last_sid"]
    now = int(time.time())
    token = sign({"iss": ISSUER, "aud": "portcullis", "iat": now, "exp": now + 120, "jti": secrets.token_hex(16), "sid": sid,
                  "events": {"http://schemas.openid.net/event/backchannel-logout": {}}}, typ="logout+jwt")
    target = request.args.get("to", BACKCHANNEL_URI)
    sent = urllib.request.Request(target, data=urllib.parse.urlencode({"logout_token": token}).encode(), method="POST")
    sent.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(sent, timeout=10) as answer:
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    return jsonify({"gateway_status": status})


if __name__ == "__main__":
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # its request lines carry codes and states
    app.run(host="127.0.0.1", port=PORT, threaded=True)
