"""The browser client and the demo page in a real Chromium (Playwright for Python),
against the real `portcullis serve` started by scripts/browser-tests.sh.

Run: scripts/browser-tests.sh (it makes its own Python environment). Each check
watches the network (requests and WebSockets as Chromium saw them), not the
page's word for it. Prints one line per check; exits 1 on the first failure.
"""
import json
import re
import os
import sys
import time

from playwright.sync_api import expect, sync_playwright

BASE = os.environ["PORTCULLIS_URL"]
USER, PASSWORD = os.environ["PORTCULLIS_USER"], os.environ["PORTCULLIS_PASSWORD"]
OUT = os.environ["PORTCULLIS_BROWSER_OUT"]


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"), args=["--no-sandbox"])
        page = browser.new_page()
        requests, sockets, closed = [], [], []
        page.on("request", lambda r: requests.append((r.method, r.url)))

        def on_socket(ws):
            sockets.append(ws.url)
            ws.on("close", lambda _: closed.append(ws.url))

        page.on("websocket", on_socket)

        # Loading the page: exactly one anonymous session, no socket before login.
        page.goto(BASE + "/demo/")
        expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
        first_id = page.text_content("#session-id")
        creates = [u for m, u in requests if m == "POST" and u.endswith("/api/session/create-anonymous")]
        check(len(creates) == 1, "loading the page creates exactly one anonymous session")
        time.sleep(1)
        check(not sockets, "no socket is opened before login")

        # A reload reuses the session.
        requests.clear()
        page.reload()
        expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
        check(page.text_content("#session-id") == first_id, "a reload reuses the session")
        check(not [u for m, u in requests if u.endswith("/api/session/create-anonymous")], "a reload creates no session")

        # Login keeps the session id, now authenticated; the socket opens; an intent round trip works.
        page.fill("#username", USER)
        page.fill("#password", PASSWORD)
        page.click("#login")
        expect(page.locator("#session-state")).to_have_text("authenticated", timeout=10000)
        check(page.text_content("#session-id") == first_id, "login keeps the same session_id, now authenticated")
        expect(page.locator("#socket-state")).to_have_text("open", timeout=10000)
        check(len(sockets) == 1, "the socket opens after login, once")
        page.fill("#intent-payload", '{"hello": "runtime"}')
        page.click("#send")
        expect(page.locator("#intent-result")).not_to_be_empty(timeout=10000)
        check(json.loads(page.text_content("#intent-result")) == {"hello": "runtime"}, "an intent round trip works")
        # Tokens live in the module's memory only: no JWT-shaped value (or access_token) in any URL.
        urls = [u for _, u in requests] + sockets
        check(not any("eyJ" in u or "access_token" in u for u in urls), "no URL the browser requested contains a token")
        os.makedirs(OUT, exist_ok=True)
        shot = os.path.join(OUT, "demo-after-login.png")
        page.screenshot(path=shot, full_page=True)
        print(f"      screenshot: {shot}")

        # Logout closes the socket and nothing reconnects.
        page.click("#logout")
        expect(page.locator("#socket-state")).to_have_text(re.compile("^closed"), timeout=10000)
        time.sleep(3)
        check(len(closed) == 1 and len(sockets) == 1, "logout closes the socket and nothing reconnects")
        expect(page.locator("#session-state")).to_have_text("anonymous", timeout=10000)
        check(page.text_content("#session-id") != first_id, "after logout the page starts a new anonymous session")
        browser.close()


if __name__ == "__main__":
    main()
