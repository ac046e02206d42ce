"""MCP clients through the gateway (issue 55), run by scripts/mcp-tests.sh.

The official MCP SDK's client (`OAuthClientProvider`), given only the MCP route's URL, finds the
authorization server from the 401, identifies itself by a Client ID Metadata Document (served
over https on localhost, a host the allow-list names) or registers itself (RFC 7591), sends the person through the
gateway's sign-in (the test provider, in Chromium) and its consent page, gets a token bound to
that server, and calls tools on FastMCP behind the route: a JSON-RPC answer, what reached the
server, and progress events on one SSE answer spaced out past the gateway's idle timeout. Then
the token is refreshed, and a token for this MCP server is refused at the other one.

Environment: GATEWAY (http://127.0.0.1:PORT), CHROMIUM, CALLBACK_PORT, CLIENT_METADATA_URL.
"""
import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

GATEWAY = os.environ["GATEWAY"]
CALLBACK = f"http://127.0.0.1:{os.environ['CALLBACK_PORT']}/callback"
FAILURES = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        FAILURES.append(what)


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens, self.client = None, None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info: OAuthClientInformationFull):
        self.client = info


class Browser:
    """Chromium, driven as a person: sign in at the provider, allow at the consent page."""

    def __init__(self, page, expected_client):
        self.page, self.result, self.pages, self.expected_client = page, None, [], expected_client

    async def redirect(self, url: str):
        check(url.startswith(GATEWAY + "/api/auth/oauth/authorize?"), "the client is sent to the gateway's authorization endpoint")
        asked = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        check(asked.get("code_challenge_method") == ["S256"] and asked.get("resource") == [GATEWAY + "/mcp/tools"], "with PKCE S256 and resource = the route's canonical URL")
        captured = asyncio.get_running_loop().create_future()

        async def callback(route):
            if not captured.done():
                captured.set_result(route.request.url)
            await route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>done</title>")

        await self.page.route(CALLBACK + "*", callback)
        await self.page.goto(url)
        if "Fake IdP" in await self.page.title():
            await self.page.click("#approve")
        await self.page.wait_for_selector("button[value=allow]", timeout=15000)
        content = await self.page.content()
        self.pages.append(content)
        check("Allow access?" in content and self.expected_client in content and "/mcp/tools" in content,
              f"the consent page names the client ({self.expected_client}), the MCP server and its scope")
        await self.page.click("button[value=allow]")
        back = urllib.parse.urlsplit(await asyncio.wait_for(captured, 15))
        query = urllib.parse.parse_qs(back.query)
        check(query.get("iss") == [GATEWAY], "the redirect back carries iss (RFC 9207)")
        self.result = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0])

    async def callback(self) -> AuthorizationCodeResult:
        return self.result


def raw(method, path, token=None, body=None, headers=None):
    request = urllib.request.Request(GATEWAY + path, method=method, data=body)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


async def flow(page, client_metadata_url, expected_client):
    kind = "CIMD" if client_metadata_url else "RFC 7591"
    print(f"--- the SDK's client, registering by {kind}")
    person = Browser(page, expected_client)
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=GATEWAY + "/mcp/tools",
        client_metadata=OAuthClientMetadata(client_name="SDK test agent", redirect_uris=[CALLBACK], grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"]),
        storage=storage, redirect_handler=person.redirect, callback_handler=person.callback, client_metadata_url=client_metadata_url)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/tools", http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name for tool in (await session.list_tools()).tools}
                check({"add", "whoami", "slow"} <= tools, "tools/list through the gateway")
                added = await session.call_tool("add", {"a": 2, "b": 40})
                check(not added.is_error and "42" in json.dumps([c.model_dump() for c in added.content]), "tools/call answered (2 + 40)")
                who = await session.call_tool("whoami", {})
                seen = json.loads(who.content[0].text)
                check(seen["authorization"] is False, "the client's token never reaches the MCP server")
                check(seen["client_id"] == storage.client.client_id and (seen["sub"] or "").startswith("ext_"),
                      "the server's assertion names the person (the provider's user) and the client")
                if client_metadata_url:
                    stamps = []

                    async def progress(done, total, message):
                        stamps.append(time.monotonic())

                    started = time.monotonic()
                    result = await session.call_tool("slow", {"steps": 3, "delay": 2.5}, progress_callback=progress)
                    ended = time.monotonic()
                    check(not result.is_error and len(stamps) == 3, f"an SSE answer with three progress events outlived the gateway's 2 s idle timeout ({ended - started:.1f} s)")
                    check(bool(stamps) and stamps[0] - started < 1.5 and ended - stamps[-1] > 2, "each event passed the gateway as it came, not at the end")
    if client_metadata_url:
        # The same client and tokens over HTTP/2 (h2c, prior knowledge): Streamable HTTP's POST, its SSE answer and GET stream.
        async with httpx2.AsyncClient(auth=provider, timeout=30, http1=False, http2=True) as http:
            probe = await http.post(GATEWAY + "/mcp/tools", json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                                    headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
            check(probe.http_version == "HTTP/2", f"the client speaks HTTP/2 to the gateway ({probe.http_version}, {probe.status_code})")
            async with streamable_http_client(GATEWAY + "/mcp/tools", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    stamps = []

                    async def progress(done, total, message):
                        stamps.append(time.monotonic())

                    result = await session.call_tool("slow", {"steps": 2, "delay": 1.0}, progress_callback=progress)
                    added = await session.call_tool("add", {"a": 40, "b": 2})
                    check(not result.is_error and len(stamps) == 2 and "42" in json.dumps([c.model_dump() for c in added.content]),
                          "over HTTP/2: tools/call answered, an SSE answer's progress events relayed")
        check(storage.client.client_id == client_metadata_url, "the client_id is its metadata document's URL")
    else:
        check(storage.client.client_id.startswith("dyn_"), "the client registered itself (RFC 7591)")
    access = storage.tokens.access_token
    refresh = storage.tokens.refresh_token
    status, _, _ = raw("POST", "/mcp/other", token=access, body=b"{}", headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    check(status == 401, "the token for /mcp/tools is refused at /mcp/other")
    form = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": refresh, "client_id": storage.client.client_id}).encode()
    status, _, body = raw("POST", "/api/auth/oauth/token", body=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 200 and json.loads(body).get("refresh_token") != refresh, "the refresh token rotates")


async def main():
    status, headers, _ = raw("POST", "/mcp/tools", body=b"{}", headers={"Content-Type": "application/json"})
    check(status == 401 and 'resource_metadata="' + GATEWAY + '/.well-known/oauth-protected-resource/mcp/tools"' in headers.get("WWW-Authenticate", ""),
          "a request without a token is 401 naming resource_metadata")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = await browser.new_page()
        # First with a Client ID Metadata Document (the 2025-11-25 default), then by registration.
        await flow(page, client_metadata_url=os.environ["CLIENT_METADATA_URL"], expected_client="described by localhost")
        await flow(page, client_metadata_url=None, expected_client="registered itself: unverified")
        await browser.close()
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)


asyncio.run(main())
