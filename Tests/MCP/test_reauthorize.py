"""Re-authorization in a real browser (issue 64, items 3 and 4), run by scripts/mcp-tests.sh.

A gateway with its own accounts (the sign-in form, whose CSP is `form-action 'self'` and what it
names), an MCP route, and the configured client `desk-app` with an https redirect and a loopback
one. Chromium, as a person, on the second day of an agent: not signed in (a new browser), with
consent remembered and not, through to the client's redirect with a code.

- loopback redirect: the consent page every time (RFC 8252 8.6: any program may listen on a
  loopback port), naming what was allowed before; allowed, the code reaches the client;
- https redirect registered exactly, consent remembered: sign in, and the browser goes on to the
  client with its code and no page (before issue 64, Chromium stopped at the form-action check);
  with prompt=consent, the page; an encoded space in state and scope (encodeURIComponent's %20);
- an app on another host (rd): the sign-in form goes on to it.

Every navigation is watched for a CSP violation in the console. The client's hosts are not
reached: Playwright answers for them (nothing leaves the machine).

Environment: GATEWAY (http://127.0.0.1:PORT), CHROMIUM; the person alice / "correct horse battery".
"""
import asyncio
import base64
import hashlib
import os
import sys
import urllib.parse

from playwright.async_api import async_playwright

GATEWAY = os.environ["GATEWAY"]
RESOURCE = GATEWAY + "/mcp/tools"
FAILURES = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        FAILURES.append(what)


def authorize_url(redirect, state, scope="tools", prompt=None):
    verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {"response_type": "code", "client_id": "desk-app", "redirect_uri": redirect, "code_challenge": challenge,
             "code_challenge_method": "S256", "resource": RESOURCE, "scope": scope, "state": state}
    if prompt:
        query["prompt"] = prompt
    # As encodeURIComponent writes it: a space is %20, never +.
    return GATEWAY + "/api/auth/oauth/authorize?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)


class Person:
    """A fresh browser context (signed out), the client's hosts answered by Playwright."""

    def __init__(self, browser):
        self.browser = browser

    async def __aenter__(self):
        self.context = await self.browser.new_context()
        self.page = await self.context.new_page()
        self.violations = []
        self.page.on("console", lambda message: self.violations.append(message.text) if "Content Security Policy" in message.text else None)
        self.arrived = asyncio.get_running_loop().create_future()

        async def client(route):
            if not self.arrived.done():
                self.arrived.set_result(route.request.url)
            await route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>client</title>")

        for pattern in ("https://desk.example/**", "http://127.0.0.1:5599/**", "https://app.example/**"):
            await self.context.route(pattern, client)
        return self

    async def __aexit__(self, *exc):
        await self.context.close()

    async def sign_in(self):
        await self.page.wait_for_selector("input[name=username]", timeout=15000)
        await self.page.fill("input[name=username]", "alice")
        await self.page.fill("input[name=password]", "correct horse battery")
        await self.page.click("button[type=submit]")

    async def landed(self, what, timeout=10):
        try:
            url = await asyncio.wait_for(asyncio.shield(self.arrived), timeout)
        except asyncio.TimeoutError:
            check(False, f"{what}: the browser reached the client (stopped at {self.page.url}; {self.violations})")
            return {}
        check(not self.violations, f"{what}: no CSP violation on the way ({self.violations})")
        return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)


def redacted(text):
    """An error's first line, without the codes and states a URL in it may carry."""
    import re
    return re.sub(r"(code|state)=[^&\s\"]*", r"\1=<redacted>", str(text).splitlines()[0] if str(text) else "")[:200]


class Scenario:
    """One person's visit: an exception (a page that never came) is a failure of its own, and the next visit runs."""

    def __init__(self, name):
        self.name = name

    async def __aenter__(self):
        return self

    async def __aexit__(self, kind, error, trace):
        if error is not None:
            check(False, f"{self.name}: {kind.__name__}: {redacted(error)}")
        return True


async def main():
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])

        print("--- an https redirect registered exactly")
        async with Scenario("https, consent not remembered"), Person(browser) as person:
            await person.page.goto(authorize_url("https://desk.example/cb", "first day", scope="tools"))
            await person.sign_in()
            await person.page.wait_for_selector("button[value=allow]", timeout=15000)
            await person.page.click("button[value=allow]")
            query = await person.landed("https, consent not remembered")
            check(bool(query.get("code")), "https, consent not remembered: allowed on the page, the code reaches the client")

        print("--- a loopback redirect: the page every time")
        for day in ("first", "second"):
            async with Scenario(f"loopback, {day} day"), Person(browser) as person:
                await person.page.goto(authorize_url("http://127.0.0.1:5599/callback", f"loop {day}"))
                await person.sign_in()
                await person.page.wait_for_selector("button[value=allow]", timeout=15000)
                content = await person.page.content()
                check("You allowed it before" in content and "any program on your computer" in content,
                          f"the {day} day: consent remembered (given for the https redirect), the page is shown again, naming what was allowed")
                await person.page.click("button[value=allow]")
                query = await person.landed(f"loopback, {day} day")
                check(bool(query.get("code")) and query.get("state") == [f"loop {day}"], f"loopback, {day} day: the code and the state (with its space) reach the client")

        print("--- the https redirect again")
        for state, scope in (("day2", "tools"), ("second day", "tools tools")):
            async with Scenario(f"https, consent remembered ({state})"), Person(browser) as person:
                # The second day: signed out, consent remembered; plainly, then with an escaped space in state and scope.
                await person.page.goto(authorize_url("https://desk.example/cb", state, scope=scope))
                await person.sign_in()
                query = await person.landed(f"https, consent remembered ({state}), after the sign-in form")
                check(bool(query.get("code")) and query.get("state") == [state],
                      f"https, consent remembered ({state}): signed in, the browser goes on to the client with its code, no page")
        async with Scenario("prompt=consent"), Person(browser) as person:
            await person.page.goto(authorize_url("https://desk.example/cb", "asked", prompt="consent"))
            await person.sign_in()
            await person.page.wait_for_selector("button[value=allow]", timeout=15000)
            check("You allowed it before" in await person.page.content(), "prompt=consent: the page, consent remembered or not")
            await person.page.click("button[value=allow]")
            query = await person.landed("prompt=consent")
            check(bool(query.get("code")), "prompt=consent: allowed, the code reaches the client")

        print("--- an app on another host")
        async with Scenario("rd on another host"), Person(browser) as person:
            await person.page.goto(GATEWAY + "/.portcullis/sign_in?rd=" + urllib.parse.quote("https://app.example/inbox?x=a%20b", safe=""))
            await person.sign_in()
            await person.landed("rd on another host")
        await browser.close()
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)


asyncio.run(main())
