"""Browser sessions in a real Chromium (Playwright for Python), started by scripts/browser-sessions.sh.

An app on a host of its own at / (Debian's Radicale, trusting X-Remote-User) behind the real
`portcullis serve` over https; a provider signing in by redirect (Tests/Browser/fake_idp.py).
Checks, each as Chromium saw it (URLs, statuses, cookies), never the page's word for it:

- opening the app lands on the provider's login page; signing in comes back to the page asked for;
- the app sees the user in its identity header (Radicale serves the user's own collection, and
  refuses another's); Radicale's own web interface makes a calendar (PROPFIND, MKCOL with the cookie);
- the session cookie: __Secure-portcullis, Domain=portcullis.test, HttpOnly, Secure, SameSite=Lax,
  unreadable from the page; a second host under the domain needs no second sign-in, its upstream
  gets the user and never the cookie;
- the app's own fetch without a session gets 401 JSON, never HTML;
- a user outside a route's policy sees the 403 page (no redirect loop);
- sign-out ends the session (its cookie cleared, the provider's end-session page next);
- the provider's back-channel logout sends the next navigation to sign in;
- a WebSocket to a route host opens with the cookie from the app's own page (its upstream gets the
  user and the assertion, never the cookie) and carries messages both ways; a page on another
  origin cannot open one;
- then the same sign-in, sign-out and back-channel logout through nginx and through Caddy in front, on the shipped forward-auth files;
- the gateway's own account form (no provider), over https and over http: signed in through the form
  and back on the page asked for, another site's form refused on a page, a cookie the gateway cannot
  read sending a navigation to sign in (and cleared);
- a CalDAV client (caldav) with a Bearer token makes a calendar and an event through a route listing
  WebDAV's and CalDAV's methods.

Prints one line per check (never a token or a cookie's value); exits 1 on the first failure.
"""
import base64
import json
import os
import re
import sys
import urllib.parse
import urllib.request

from playwright.sync_api import sync_playwright

PORT = os.environ["PORT"]
SSO = os.environ["SSO_URL"]
WIKI = f"https://wiki.portcullis.test:{PORT}"
APP = f"https://app.portcullis.test:{PORT}"
ADMIN = f"https://admin.portcullis.test:{PORT}"
LIVE = f"https://live.portcullis.test:{PORT}"
AUTH = f"https://auth.portcullis.test:{PORT}"


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def sign_in_at_provider(page):
    page.wait_for_url(re.compile(re.escape(SSO) + "/auth"), timeout=10000)
    page.click("#approve")


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
            args=["--no-sandbox", "--host-resolver-rules=MAP *.portcullis.test 127.0.0.1, MAP evil.test 127.0.0.1", "--ignore-certificate-errors"])
        context = browser.new_context(ignore_https_errors=True)
        page = context.new_page()
        visited = []
        page.on("request", lambda request: visited.append(request.url) if request.is_navigation_request() else None)

        # Open the app at / on its own host: the provider's login page, then back to the page asked for.
        page.goto(WIKI + "/.web/")
        check(any(u.startswith(AUTH + "/.portcullis/sign_in?rd=") for u in visited), "the app's navigation was sent to the gateway's sign-in on the public host")
        sign_in_at_provider(page)
        page.wait_for_url(WIKI + "/.web/", timeout=10000)
        check("Radicale" in page.content(), "signed in, the browser is back on the page it asked for (Radicale's own page)")
        check(any("/api/auth/oidc/callback" in u for u in visited), "the browser came back through the gateway's callback")
        cookies = {c["name"]: c for c in context.cookies()}
        session = cookies.get("__Secure-portcullis")
        check(session is not None and session["domain"].lstrip(".") == "portcullis.test" and session["httpOnly"] and session["secure"]
              and session["sameSite"] == "Lax", "the session cookie is __Secure-portcullis for portcullis.test, HttpOnly, Secure, SameSite=Lax")
        check(not any(name.startswith("__Host-portcullis-flow-") for name in cookies), "the flow cookie is gone once used")
        check(page.evaluate("document.cookie").find("portcullis") < 0, "the page's script cannot read the session cookie")

        # Radicale sees the user in X-Remote-User: its own collection is the user's, another's is refused.
        info = page.evaluate(f"fetch('{WIKI}/.portcullis/userinfo').then(r => r.json())")
        user = info["user"]
        check(user.startswith("ext_") and info["email"] == "sso@example.com", "userinfo names the signed-in user")
        own = page.goto(f"{WIKI}/{user}/")
        check(own.status == 403 and "Directory listings are not supported" in page.content(), "Radicale took the user from X-Remote-User: it serves the user's own collection")
        other = page.goto(f"{WIKI}/someone-else/")
        check(other.status == 403 and "Access to the requested resource forbidden" in page.content(), "and refuses another user's")
        radicale_web_interface(page, user)

        # A second host under cookie_domain: no second sign-in; its upstream gets the user, never the cookie.
        visited.clear()
        answer = page.goto(APP + "/page")
        received = json.loads(page.locator("body").inner_text())
        headers = {k.lower(): v for k, v in received["headers"]}
        check(answer.status == 200 and not any("/.portcullis/sign_in" in u for u in visited), "a second app host under the cookie domain needed no second sign-in")
        check(headers.get("x-webauth-user") == user and headers.get("x-webauth-email") == "sso@example.com", "its upstream got the user and email in its identity headers")
        check("portcullis" not in headers.get("cookie", ""), "and never the gateway's cookie")
        check("x-portcullis-assertion" in headers, "and the signed assertion")

        # The app's own fetch without a session: 401 JSON, never a page.
        anonymous = page.evaluate(f"fetch('{APP}/api/data', {{credentials: 'omit'}}).then(async r => [r.status, r.headers.get('content-type'), await r.text()])")
        check(anonymous[0] == 401 and anonymous[1].startswith("application/json") and "<html" not in anonymous[2], "an app's fetch without the cookie gets 401 JSON, never HTML")

        # A WebSocket to a route (Grafana Live, a Jupyter kernel): the cookie signs it in from the
        # app's own page; another site's page (the wiki's host is another origin) cannot open one.
        page.goto(LIVE + "/")
        live = page.evaluate("""() => new Promise((resolve) => {
            const socket = new WebSocket(location.origin.replace("https", "wss") + "/socket");
            const seen = [];
            socket.onmessage = (e) => { seen.push(e.data); if (seen.length === 1) socket.send("through the tunnel"); else { socket.close(); resolve(seen); } };
            socket.onerror = () => resolve(["error"]);
            setTimeout(() => resolve(seen.length ? seen : ["timeout"]), 8000);
        })""")
        first = json.loads(live[0]) if live and live[0].startswith("{") else {}
        check(first.get("user") == user and first.get("assertion") and not first.get("cookie"),
              "a WebSocket to a route opens with the session cookie; its upstream got the user and the assertion, never the cookie")
        check(len(live) == 2 and live[1] == "through the tunnel", "messages cross the tunnel both ways")
        page.goto(WIKI + "/.web/")
        hijack = page.evaluate(f"""() => new Promise((resolve) => {{
            const socket = new WebSocket("{LIVE.replace('https', 'wss')}/socket");
            socket.onopen = () => resolve("open");
            socket.onerror = () => resolve("refused");
            setTimeout(() => resolve("timeout"), 8000);
        }})""")
        check(hijack == "refused", "a page on another origin cannot open a WebSocket as the user (403 csrf_refused at the handshake)")

        # A user outside a route's policy: the 403 page, not a redirect loop.
        visited.clear()
        refused = page.goto(ADMIN + "/")
        check(refused.status == 403 and "Not allowed" in page.content() and len(visited) == 1, "a user outside the policy sees the 403 page (no redirect)")

        # Sign-out from the app's own host: the session ends, the cookie goes, the provider's end-session page is next.
        page.goto(APP + "/page")
        page.evaluate(f"""() => {{ const f = document.createElement('form'); f.method = 'post'; f.action = '{APP}/.portcullis/sign_out?rd=%2F';
                           document.body.appendChild(f); f.submit(); }}""")
        page.wait_for_url(re.compile(re.escape(SSO) + "/logout"), timeout=10000)
        check("id_token_hint=" in page.url and "post_logout_redirect_uri=" in page.url, "sign-out goes on to the provider's end-session page")
        check("__Secure-portcullis" not in {c["name"] for c in context.cookies()}, "the session cookie is cleared")
        visited.clear()
        page.goto(WIKI + "/.web/")
        check(re.match(re.escape(SSO) + "/auth", page.url) is not None, "after sign-out, the app sends the browser to sign in again")

        # Signed in again; the provider's back-channel logout sends the next navigation to sign in.
        page.click("#approve")
        page.wait_for_url(WIKI + "/.web/", timeout=10000)
        with urllib.request.urlopen(urllib.request.Request(SSO + "/test/backchannel-logout", data=b"", method="POST"), timeout=10) as response:
            sent = json.loads(response.read())
        check(sent["gateway_status"] == 200, "the gateway accepted the provider's logout token")
        page.goto(WIKI + "/.web/")
        check(re.match(re.escape(SSO) + "/auth", page.url) is not None, "after the provider's back-channel logout, the next navigation signs in again")
        check(not any("eyJ" in u for u in visited), "no URL the browser requested holds a token")
        for name in ("nginx", "caddy"):
            through_proxy(browser, name, os.environ[name.upper() + "_URL"], os.environ[name.upper() + "_GATEWAY_URL"])
        account_form(browser, "https", os.environ["ACCOUNTS_TLS_URL"])
        account_form(browser, "http", os.environ["ACCOUNTS_HTTP_URL"])
        caldav_client(os.environ["ACCOUNTS_HTTP_URL"])
        browser.close()


def account_form(browser, scheme, base):
    """The gateway's own account form (no provider configured), as a person uses it: a navigation is
    sent to it, a wrong password is said on the page, the right one signs in and returns to the page
    asked for; another site's form is refused on a page, never signed in; a session cookie the
    gateway cannot read sends a navigation to sign in and is cleared (an app's fetch gets 401 JSON)."""
    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    cookie_name = "__Host-portcullis" if scheme == "https" else "portcullis"
    answer = page.goto(base + "/app/page?x=1")
    check(page.url.startswith(base + "/.portcullis/sign_in?rd=") and answer.status == 200 and page.locator("#username").count() == 1,
          f"account form ({scheme}): a navigation without a session is sent to the gateway's account form")
    page.fill("#username", "alice")
    page.fill("#password", "not the password")
    with page.expect_navigation():
        page.click("button[type=submit]")
    alert = page.locator("[role=alert]")
    check("Sign in" in page.title() and alert.count() == 1 and page.locator("#username").count() == 1,
          f"account form ({scheme}): a wrong password is said on the form, as a page ({alert.inner_text() if alert.count() else None})")
    page.fill("#username", "alice")
    page.fill("#password", "form password 1")
    with page.expect_navigation(url=base + "/app/page?x=1", timeout=10000):
        page.click("button[type=submit]")
    received = json.loads(page.locator("body").inner_text())
    headers = {k.lower(): v for k, v in received["headers"]}
    check(headers.get("x-webauth-user", "").startswith("usr_") and "x-portcullis-assertion" in headers,
          f"account form ({scheme}): the right password signs in in Chromium and returns to the page asked for; the app gets the user")
    check(any(c["name"] == cookie_name and c["httpOnly"] for c in context.cookies()), f"account form ({scheme}): the session cookie {cookie_name} is set, HttpOnly")

    # Sign-out from the app's page: the session ends, the next navigation signs in again.
    page.evaluate(f"""() => {{ const f = document.createElement('form'); f.method = 'post'; f.action = '/.portcullis/sign_out?rd=%2Fapp%2Fpage%3Fx%3D2';
                       document.body.appendChild(f); f.submit(); }}""")
    page.wait_for_url(re.compile(re.escape(base) + r"/\.portcullis/sign_in\?rd="), timeout=10000)
    check(not any(c["name"] == cookie_name for c in context.cookies()), f"account form ({scheme}): sign-out clears the cookie, and the app's page asks to sign in again")

    # Another site's page posting the form with the right password: refused on a page, not signed in.
    evil = "http://evil.test/"
    context.route(evil, lambda route: route.fulfill(status=200, content_type="text/html", body=f"""<!doctype html>
        <form method="post" action="{base}/.portcullis/sign_in"><input name="username" value="alice">
        <input name="password" value="form password 1"><input name="rd" value="/app/page"></form>
        <script>document.forms[0].submit()</script>"""))
    refusals = []
    page.on("response", lambda r: refusals.append((r.status, r.headers.get("content-type", ""))) if r.url.startswith(base + "/.portcullis/sign_in") else None)
    page.goto(evil)
    page.wait_for_url(base + "/.portcullis/sign_in", timeout=10000)
    text = page.evaluate("document.body.innerText")
    check(refusals and refusals[-1][0] == 403 and refusals[-1][1].startswith("text/html") and "csrf_refused" in text,
          f"account form ({scheme}): another site's form is refused 403 on a page a person reads ({refusals[-1:] or None})")
    check(not any(c["name"] == cookie_name for c in context.cookies()), f"account form ({scheme}): and nobody is signed in by it")

    # A session cookie this gateway did not set: not its form, then of its form but unknown (a
    # reinstalled gateway's). The app's fetch runs from a page of the gateway's origin that has no
    # CSP (the gateway's own pages allow no fetch): Playwright serves it, the fetch goes to the gateway.
    context.route(base + "/test-app-page", lambda route: route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>app</title>"))
    for kind, value in (("a value not of the gateway's form", "not-a-session-cookie"), ("an unknown cookie of the gateway's form", base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("="))):
        page.goto(base + "/test-app-page")
        context.add_cookies([{"name": cookie_name, "value": value, "url": base + "/", "httpOnly": True, "secure": scheme == "https"}])
        fetched = page.evaluate("fetch('/app/data').then(async r => [r.status, r.headers.get('content-type'), await r.text()])")
        check(fetched[0] == 401 and (fetched[1] or "").startswith("application/json"), f"account form ({scheme}): with {kind}, an app's fetch gets 401 JSON ({fetched[0]})")
        answer = page.goto(base + "/app/page?x=4")
        check(page.url.startswith(base + "/.portcullis/sign_in?rd=") and page.locator("#username").count() == 1,
              f"account form ({scheme}): with {kind}, a navigation is sent to sign in ({answer.status}, never stuck on 401 JSON)")
        check(not any(c["name"] == cookie_name for c in context.cookies()), f"account form ({scheme}): and the cookie is cleared")
    context.close()


def radicale_web_interface(page, user):
    """Radicale's own web interface through an auth: browser route: its PROPFIND (with the Basic
    credentials its login form sends, which the gateway leaves to the cookie) and MKCOL pass with the
    session cookie from the app's own origin, and the collection it makes is the signed-in user's."""
    page.goto(WIKI + "/.web/")
    page.wait_for_selector("#loginscene:not(.hidden)", timeout=10000)
    page.fill("#loginscene [data-name=user]", user)
    page.fill("#loginscene [data-name=password]", "not-checked-by-radicale")
    page.click("#loginscene button[type=submit]")
    page.wait_for_selector("#collectionsscene:not(.hidden)", timeout=10000)
    check(page.locator("#loginscene [data-name=error]").inner_text() == "",
          "Radicale's web interface: its PROPFIND (with the Basic credentials of its login form) passes with the session cookie; it lists the user's collections")
    page.click("#collectionsscene [data-name=new]")
    page.wait_for_selector("#createcollectionscene:not(.hidden)", timeout=10000)
    page.fill("#createcollectionscene [data-name=displayname]", "Team calendar")
    page.select_option("#createcollectionscene [data-name=type]", "CALENDAR")
    page.click("#createcollectionscene [data-name=submit]")
    try:
        page.wait_for_selector("#collectionsscene:not(.hidden) article:not(.hidden) >> text=Team calendar", timeout=10000)
    except Exception:
        pass
    made = page.locator("#collectionsscene article:not(.hidden)").filter(has_text="Team calendar").count()
    check(made == 1, f"Radicale's web interface: MKCOL from the app's own page makes a calendar, listed under the user ({made})")
    listing = page.evaluate(f"""fetch('{WIKI}/{user}/', {{method: 'PROPFIND', headers: {{Depth: '1'}}}}).then(async r => [r.status, await r.text()])""")
    check(listing[0] == 207 and "Team calendar" in listing[1], f"the app's own PROPFIND with the cookie lists it ({listing[0]})")


def caldav_client(base):
    """A CalDAV client (caldav from PyPI) with a Bearer token through a route listing WebDAV's and
    CalDAV's methods: it finds its principal, makes a calendar (MKCALENDAR), saves an event (PUT)
    and reads it back (REPORT); the same client without a token is refused 401."""
    import caldav
    request = urllib.request.Request(base + "/api/auth/login", data=json.dumps({"username": "alice", "password": "form password 1"}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        token = json.loads(response.read())["access_token"]
    with caldav.DAVClient(url=base + "/", headers={"Authorization": "Bearer " + token}) as client:
        principal = client.principal()
        calendar = principal.make_calendar(name="Ops rota")
        calendar.save_event("BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//portcullis test//EN\nBEGIN:VEVENT\nUID:rota-1@portcullis.test\n"
                            "DTSTAMP:20261127T090000Z\nDTSTART:20261201T090000Z\nDTEND:20261201T100000Z\nSUMMARY:On call\nEND:VEVENT\nEND:VCALENDAR\n")
        events = calendar.search(start=__import__("datetime").datetime(2026, 12, 1), end=__import__("datetime").datetime(2026, 12, 2), event=True)
        check(str(principal.url).rstrip("/").rsplit("/", 1)[-1].startswith("usr_") and any("On call" in e.data for e in events),
              f"a CalDAV client with a Bearer token: principal, MKCALENDAR, PUT and REPORT through the gateway ({len(events)} event)")
    try:
        with caldav.DAVClient(url=base + "/") as anonymous:
            anonymous.principal()
        refused = None
    except Exception as error:  # caldav raises its own AuthorizationError for the 401
        refused = type(error).__name__
    check(refused is not None, f"the same client without a token is refused ({refused})")


def through_proxy(browser, name, base, gateway):
    """The same sign-in, sign-out and back-channel logout with the proxy in front asking forward-auth
    (the shipped configuration files); `gateway` is the gateway the proxy asks."""
    context = browser.new_context()
    page = context.new_page()
    visited = []
    page.on("request", lambda request: visited.append(request.url) if request.is_navigation_request() else None)
    page.goto(base + "/app/page?x=1")
    check(any("/.portcullis/sign_in?rd=" in u for u in visited), f"{name}: a navigation without a session is sent to the gateway's sign-in")
    sign_in_at_provider(page)
    page.wait_for_url(base + "/app/page?x=1", timeout=10000)
    received = json.loads(page.locator("body").inner_text())
    headers = {k.lower(): v for k, v in received["headers"]}
    check(headers.get("x-auth-request-user", "").startswith("ext_") and "x-portcullis-assertion" in headers,
          f"{name}: signed in, back on the page asked for; the app got the user and the assertion")
    check("portcullis" not in headers.get("cookie", ""), f"{name}: the app never got the gateway's cookie")
    anonymous = page.evaluate(f"fetch('{base}/app/data', {{credentials: 'omit'}}).then(async r => [r.status, r.headers.get('content-type'), await r.text()])")
    check(anonymous[0] == 401 and (anonymous[1] or "").startswith("application/json") and "<html" not in anonymous[2],
          f"{name}: an app's fetch without the cookie gets 401 JSON, never HTML")
    posted = page.evaluate(f"fetch('{base}/app/form', {{method: 'POST', body: 'x'}}).then(r => r.status)")
    check(posted == 200, f"{name}: the app's own POST with the cookie passes (same origin)")

    # Sign-out from the app's page, through the proxy's /.portcullis/: the provider's end-session page is next.
    page.evaluate(f"""() => {{ const f = document.createElement('form'); f.method = 'post'; f.action = '{base}/.portcullis/sign_out?rd=%2F';
                       document.body.appendChild(f); f.submit(); }}""")
    page.wait_for_url(re.compile(re.escape(SSO) + "/logout"), timeout=10000)
    check("id_token_hint=" in page.url, f"{name}: sign-out through the proxy goes on to the provider's end-session page")
    check(not any(c["name"] == "portcullis" for c in context.cookies()), f"{name}: the session cookie is cleared")
    page.goto(base + "/app/page?x=2")
    check(re.match(re.escape(SSO) + "/auth", page.url) is not None, f"{name}: after sign-out, the app sends the browser to sign in again")

    # Signed in again; the provider's back-channel logout (to the gateway the proxy asks) sends the next navigation to sign in.
    page.click("#approve")
    page.wait_for_url(base + "/app/page?x=2", timeout=10000)
    target = urllib.parse.quote(gateway + "/api/auth/oidc/backchannel-logout", safe="")
    with urllib.request.urlopen(urllib.request.Request(SSO + "/test/backchannel-logout?to=" + target, data=b"", method="POST"), timeout=10) as response:
        sent = json.loads(response.read())
    check(sent["gateway_status"] == 200, f"{name}: the gateway behind the proxy accepted the provider's logout token")
    page.goto(base + "/app/page?x=3")
    check(re.match(re.escape(SSO) + "/auth", page.url) is not None, f"{name}: after the provider's back-channel logout, the next navigation signs in again")
    context.close()


if __name__ == "__main__":
    main()
