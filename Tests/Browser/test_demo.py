"""The browser client and the demo page in a real Chromium (Playwright for Python),
against the real `portcullis serve` and a separate `portcullis runtime`, both
started by scripts/browser-tests.sh (access tokens live 6 seconds there).

Run: scripts/browser-tests.sh (it makes its own Python environment). Each check
watches the network (requests, WebSockets and their frames as Chromium saw
them), not the page's word for it. Prints one line per check (never a token);
waits with page.wait_for_timeout, not time.sleep, so Playwright's events keep arriving;
exits 1 on the first failure.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from playwright.sync_api import expect, sync_playwright

BASE = os.environ["PORTCULLIS_URL"]
USER, PASSWORD = os.environ["PORTCULLIS_USER"], os.environ["PORTCULLIS_PASSWORD"]
OUT = os.environ["PORTCULLIS_BROWSER_OUT"]
WORK = os.environ["PORTCULLIS_WORK"]
RUNTIME_ARGS = os.environ["RUNTIME_ARGS"].splitlines()
RUNTIME_PORT = int(os.environ["RUNTIME_PORT"])
TOKEN_LIFETIME = 6


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


# Keeps every text the demo's socket state showed (with its close code), for describe().
SOCKET_STATE_HISTORY = """
    window.__socketStates = [];
    document.addEventListener("DOMContentLoaded", () => {
        const shown = document.getElementById("socket-state");
        if (shown) new MutationObserver(() => window.__socketStates.push(shown.textContent))
            .observe(shown, { childList: true, characterData: true, subtree: true });
    });
"""


def describe(page):
    """What the demo page shows (no token is ever on it), printed when a check fails."""
    shown = {}
    for element in ("session-state", "session-event", "socket-state", "intent-result", "intent-error", "login-error"):
        try:
            shown[element] = page.text_content(f"#{element}", timeout=1000)
        except Exception as error:  # the page itself may be gone
            shown[element] = f"<unreadable: {type(error).__name__}>"
    try:
        shown["socket states since the page loaded"] = page.evaluate("window.__socketStates")
    except Exception as error:
        shown["socket states since the page loaded"] = f"<unreadable: {type(error).__name__}>"
    return shown


class Network:
    """What the page asked for: requests, WebSockets, their closes and the frames it sent.

    Also a timeline of it all (answers, socket opens and closes, the type of every frame
    sent, every frame received), printed when a check fails; it never holds a token.
    """

    def __init__(self, page):
        self.requests, self.sockets, self.closed, self.sent = [], [], [], []
        self.responses, self.timeline = [], []
        self.started = time.time()
        page.on("request", lambda r: self.requests.append((r.method, r.url)))
        page.on("response", self._response)
        page.on("websocket", self._socket)

    def _note(self, text):
        self.timeline.append(f"{time.time() - self.started:7.2f}s {text}")

    def _response(self, response):
        answer = (response.request.method, response.url[len(BASE):], response.status)
        self.responses.append(answer)
        self._note(f"{answer[0]} {answer[1]} -> {answer[2]}")

    def _socket(self, ws):
        self.sockets.append(ws.url)
        number = len(self.sockets)
        self._note(f"socket {number} opening")
        ws.on("close", lambda _: (self.closed.append(ws.url), self._note(f"socket {number} closed")))
        ws.on("framesent", lambda payload: self._sent(number, payload))
        ws.on("framereceived", lambda payload: self._note(f"socket {number} received {payload}"))

    def _sent(self, number, payload):
        self.sent.append(payload)
        try:
            kind = json.loads(payload).get("type")
        except (TypeError, ValueError, AttributeError):
            kind = "a non-JSON frame"
        self._note(f"socket {number} sent {kind}")  # the type only: a renewal holds a token

    def creates(self):
        return [u for m, u in self.requests if m == "POST" and u.endswith("/api/session/create-anonymous")]

    def renewals(self):
        return [f for f in self.sent if isinstance(f, str) and '"auth.renew"' in f]


def post(path, body, token=None):
    request = urllib.request.Request(BASE + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def port_open(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def send_intent(page, payload):
    page.fill("#intent-payload", json.dumps(payload))
    page.click("#send")
    expect(page.locator("#intent-result")).to_have_text(re.compile(re.escape(list(payload.values())[0])), timeout=10000)
    return json.loads(page.text_content("#intent-result"))


def log_in(page):
    page.fill("#username", USER)
    page.fill("#password", PASSWORD)
    page.click("#login")
    expect(page.locator("#session-state")).to_have_text("authenticated", timeout=10000)
    expect(page.locator("#socket-state")).to_have_text("open", timeout=10000)


def first_visit_and_login(page, net):
    # Loading the page: exactly one anonymous session, no socket before login.
    page.goto(BASE + "/demo/")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    first_id = page.text_content("#session-id")
    check(len(net.creates()) == 1, "loading the page creates exactly one anonymous session")
    page.wait_for_timeout(1000)
    check(not net.sockets, "no socket is opened before login")

    # A reload reuses the session.
    net.requests.clear()
    page.reload()
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    check(page.text_content("#session-id") == first_id, "a reload reuses the session")
    check(not net.creates(), "a reload creates no session")

    # Login keeps the session id, now authenticated; the socket opens; an intent round trip works.
    log_in(page)
    check(page.text_content("#session-id") == first_id, "login keeps the same session_id, now authenticated")
    check(len(net.sockets) == 1, "the socket opens after login, once")
    check(send_intent(page, {"hello": "runtime"}) == {"hello": "runtime"}, "an intent round trip works")
    os.makedirs(OUT, exist_ok=True)
    shot = os.path.join(OUT, "demo-after-login.png")
    page.screenshot(path=shot, full_page=True)
    print(f"      screenshot: {shot}")


def outlives_token(page, net):
    # The socket outlives its first token: the client refreshes and sends auth.renew.
    page.wait_for_timeout(2500 * TOKEN_LIFETIME)
    check(len(net.sockets) == 1 and not net.closed, f"the socket stays open past the token's {TOKEN_LIFETIME}-second life")
    check(len(net.renewals()) >= 2, "the client refreshed and sent auth.renew on the open socket")
    check(send_intent(page, {"after": "renewal"}) == {"after": "renewal"}, "an intent works after the first token expired")


def runtime_restart(page, net, runtime):
    # The Runtime stops under the open socket: the socket closes, the client backs off, asks why
    # and reconnects by itself once the Runtime is back.
    opened, answered = len(net.sockets), len(net.responses)
    os.kill(runtime["pid"], signal.SIGTERM)
    expect(page.locator("#socket-state")).to_have_text(re.compile("^closed"), timeout=10000)
    stopped_at = time.time()
    deadline = stopped_at + 20
    while port_open(RUNTIME_PORT) and time.time() < deadline:
        page.wait_for_timeout(100)
    check(not port_open(RUNTIME_PORT), "the Runtime stopped")
    page.wait_for_timeout(4000)
    attempts = len(net.sockets) - opened
    asked = [status for method, path, status in net.responses[answered:] if method == "GET" and path == "/api/runtime/agent"]
    check(attempts <= 5 and 1 <= len(asked) <= 8,
          f"while the Runtime is away the client backs off and asks why ({attempts} socket attempts, {len(asked)} GETs answered {sorted(set(asked))} in about 4 s)")
    log = open(os.path.join(WORK, "runtime-restarted.log"), "w")
    restarted = subprocess.Popen(RUNTIME_ARGS, cwd=WORK, stdout=log, stderr=subprocess.STDOUT)
    runtime["process"] = restarted
    with open(os.path.join(WORK, "runtime.pid"), "w") as f:
        f.write(str(restarted.pid))
    expect(page.locator("#socket-state")).to_have_text("open", timeout=40000)
    check(len(net.sockets) > opened, "the client reconnects by itself once the Runtime is back")
    check(send_intent(page, {"after": "restart"}) == {"after": "restart"}, "an intent works on the new socket")


def revoked_elsewhere(page, net):
    # The same user signs this session out from elsewhere (another device's logout naming it).
    session_id = page.text_content("#session-id")
    other = post("/api/auth/login", {"username": USER, "password": PASSWORD})
    post("/api/auth/logout", {"session_id": session_id}, token=other["access_token"])
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=15000)
    check(page.text_content("#session-id") != session_id, "a session revoked elsewhere: the client starts a new anonymous session")
    check(page.text_content("#session-event").startswith("session_ended"), "and reports it (the session event's reason is session_ended)")
    expect(page.locator("#login-box")).to_be_visible()


def logout(page, net):
    log_in(page)
    expect(page.locator("#send")).to_be_enabled(timeout=10000)
    # An intent the Runtime refuses leaves its error on the page, until the session ends.
    page.fill("#intent-type", "no.such.intent")
    page.click("#send")
    expect(page.locator("#intent-error")).not_to_be_empty(timeout=10000)
    page.fill("#intent-type", "echo")
    opened, closed = len(net.sockets), len(net.closed)
    page.click("#logout")
    expect(page.locator("#socket-state")).to_have_text(re.compile("^closed"), timeout=10000)
    expect(page.locator("#intent-error")).to_be_empty(timeout=5000)
    check(page.text_content("#intent-result") == "", "logout clears the last session's intent answer and error")
    page.wait_for_timeout(3000)
    check(len(net.closed) == closed + 1 and len(net.sockets) == opened, "logout closes the socket and nothing reconnects")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)


def many_components(browser):
    # A fresh page where five components each make a client and call start() at once, before
    # the demo's own start: still exactly one anonymous session.
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    net = Network(page)
    page.add_init_script("""
        window.__starts = import("/client/portcullis.js").then(({ PortcullisClient }) =>
            Promise.all([1, 2, 3, 4, 5].map(() => new PortcullisClient().start().then((s) => s.session_id))));
    """)
    page.goto(BASE + "/demo/")
    ids = page.evaluate("window.__starts")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    ids.append(page.text_content("#session-id"))
    check(len(net.creates()) == 1, "six clients starting on one page make exactly one anonymous session")
    check(len(set(ids)) == 1, "and all six see the same session")
    context.close()


def provider_token(seconds):
    """An access token of the trusted provider (minted with `portcullis token issue` and its key)."""
    return subprocess.run(
        [os.environ["PORTCULLIS_BIN_PATH"], "token", "issue", "--keys", os.environ["IDP_KEYS"], "--sub", "browser-external",
         "--issuer", os.environ["IDP_ISSUER"], "--audience", "portcullis-browser", "--ttl", f"{seconds}s"],
        check=True, capture_output=True, text=True).stdout.strip()


def sign_in_with_token(browser):
    # A page signs in with its identity provider's token: the anonymous session is upgraded in
    # place, the socket opens and answers, nothing is refreshed, and the token's end is reported.
    context = browser.new_context(bypass_csp=True)
    page = context.new_page()
    net = Network(page)
    page.goto(BASE + "/demo/")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    lifetime = 8
    result = page.evaluate("""async (token) => {
        const { PortcullisClient } = await import("/client/portcullis.js");
        const client = new PortcullisClient();
        window.__provider = client;
        window.__events = [];
        client.addEventListener("session", (e) => window.__events.push([e.detail.reason, e.detail.session && e.detail.session.state]));
        const anonymous = await client.start();
        const upgraded = await client.signInWithToken(token);
        const agent = client.agent();
        // Right after agent(), before its open event: the request waits for the socket to open.
        const answer = await agent.request("echo", { via: "provider" }, { timeoutMs: 10000 });
        return { before: anonymous.session_id, after: upgraded.session_id, state: upgraded.state, tenant: upgraded.tenant_id,
                 user: upgraded.user_id, answer };
    }""", provider_token(lifetime))
    check(result["before"] == result["after"] and result["state"] == "authenticated", "signInWithToken upgrades the page's anonymous session in place")
    check(result["user"].startswith("ext_") and result["tenant"] == "default", "the session belongs to the provider's user (ext_...) in the configured tenant")
    check(result["answer"] == {"via": "provider"}, "an intent asked right after client.agent() waits for the socket to open, and the socket opened with the provider's token answers it")
    page.wait_for_timeout((lifetime + 2) * 1000)
    events = page.evaluate("window.__events")
    check(["token_expired", "anonymous"] in events, f"when the provider's token ends the client reports token_expired and starts anonymous again ({events})")
    check(not any(u.endswith("/api/auth/refresh") for _, u in net.requests), "nothing is refreshed for a provider's token")
    urls = [u for _, u in net.requests] + net.sockets
    check(not any("eyJ" in u or "access_token" in u for u in urls), "no URL holds the provider's token")
    context.close()


def provider_sign_in(browser):
    # The demo page's "Sign in with Fake IdP": the provider's login page, back to the demo with
    # the session upgraded in place, the socket open; the provider's back-channel logout closes
    # it with 1008; logging out at the provider goes to its end-session page.
    context = browser.new_context()  # the demo's own content security policy applies
    page = context.new_page()
    net = Network(page)
    page.add_init_script(SOCKET_STATE_HISTORY)
    page.goto(BASE + "/demo/")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    before = page.text_content("#session-id")
    page.click("#provider-fake")
    page.wait_for_url(re.compile(re.escape(os.environ["SSO_URL"]) + "/auth"), timeout=10000)
    check("session" not in page.url and before not in page.url, "the provider's URL carries no session id")
    page.click("#approve")
    expect(page.locator("#session-state")).to_have_text("authenticated", timeout=10000)
    expect(page.locator("#socket-state")).to_have_text("open", timeout=10000)
    check(page.text_content("#session-id") == before, "the sign-in through the provider upgraded the page's anonymous session in place")
    check("#" not in page.url and page.evaluate("location.hash") == "", "the login code's fragment is gone from the address bar")
    check(page.evaluate("sessionStorage.getItem('portcullis.session_id.login_verifier')") is None, "the verifier left storage once used")
    answer = send_intent(page, {"via": "sso"})
    check(answer == {"via": "sso"}, "the socket opened after the provider sign-in answers an intent")
    callbacks = [u for _, u in net.requests if "/api/auth/oidc/callback" in u]
    check(len(callbacks) == 1, "the browser went through the gateway's callback once")
    urls = [u for _, u in net.requests] + net.sockets
    check(not any("eyJ" in u or "access_token" in u or "refresh_token" in u for u in urls), "no URL holds a token")
    # The provider ends the user's session: its back-channel logout reaches the gateway.
    closed_before = len(net.closed)
    with urllib.request.urlopen(urllib.request.Request(os.environ["SSO_URL"] + "/test/backchannel-logout", data=b"", method="POST"),
                                timeout=10) as response:
        sent = json.loads(response.read())
    check(sent["gateway_status"] == 200, "the gateway accepted the provider's logout token")
    started = time.time()
    expect(page.locator("#socket-state")).to_have_text(re.compile("1008"), timeout=5000)
    check(time.time() - started < 2 and len(net.closed) > closed_before, "the socket closed with 1008 when the provider logged the user out")
    expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
    # Again, then "Log out here and at the provider" navigates to the provider's end-session page.
    page.click("#provider-fake")
    page.click("#approve")
    expect(page.locator("#session-state")).to_have_text("authenticated", timeout=10000)
    page.click("#logout-provider")
    page.wait_for_url(re.compile(re.escape(os.environ["SSO_URL"]) + "/logout"), timeout=10000)
    check("id_token_hint=" in page.url and "post_logout_redirect_uri=" in page.url, "logout at the provider names id_token_hint and post_logout_redirect_uri")
    expect(page.locator("#signed-out")).to_be_visible(timeout=5000)
    context.close()


def main():
    runtime = {"pid": int(os.environ["RUNTIME_PID"]), "process": None}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=["--no-sandbox"])
            page = browser.new_page()
            net = Network(page)
            page.add_init_script(SOCKET_STATE_HISTORY)
            try:
                first_visit_and_login(page, net)
                outlives_token(page, net)
                runtime_restart(page, net, runtime)
                revoked_elsewhere(page, net)
                logout(page, net)
                states = page.evaluate("window.__socketStates")
                check(not any("token expired" in state for state in states),
                      "no socket closed for an expired token (the client renews in time, also on a socket that opened mid-refresh)")
            except BaseException:
                print(f"      the page showed: {describe(page)}")
                print("      the last 40 events:")
                for event in net.timeline[-40:]:
                    print(f"        {event}")
                raise
            urls = [u for _, u in net.requests] + net.sockets
            check(not any("eyJ" in u or "access_token" in u or "refresh_token" in u for u in urls), "no URL the browser requested contains a token")
            many_components(browser)
            sign_in_with_token(browser)
            provider_sign_in(browser)
            browser.close()
    finally:
        if runtime["process"]:
            runtime["process"].terminate()
            runtime["process"].wait(timeout=20)


if __name__ == "__main__":
    main()
