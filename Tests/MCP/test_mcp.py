"""MCP clients through the gateway (issue 55), run by scripts/mcp-tests.sh.

The official MCP SDK's client (`OAuthClientProvider`), given only the MCP route's URL, finds the
authorization server from the 401, identifies itself by a Client ID Metadata Document (served
over https on localhost, a host the allow-list names) or registers itself (RFC 7591), sends the person through the
gateway's sign-in (the company's provider, Tests/MCP/company_idp.py on Authlib, in Chromium) and its consent page, gets a token bound to
that server, and calls tools on FastMCP behind the route: a JSON-RPC answer, what reached the
server, and progress events on one SSE answer spaced out past the gateway's idle timeout. Then
the token is refreshed, and a token for this MCP server is refused at the other one.

Then a route with rules per tool (issue 56): the filtered tools/list, an allowed call, a refused one
read by the client as the JSON-RPC error it is, and a step-up (403 insufficient_scope) the SDK
answers by sending the person back to consent to the new scope. Last, the person's own page
(/.portcullis/agents) in Chromium: the grants listed, one revoked with its button while the agent
holds an SSE stream over HTTP/2, which ends within a second; the agent's next call is refused.
Ending access ends the work as well as the stream: the MCP server itself observes the slow tool's
cancellation within a second of the revoke, and of the back-channel logout (issue 65). The consent
page offers "Not you? Sign out"; the agents page's sign-out button says what it ends, signs out at
the provider too (its end-session page, through the page's form-action) and ends the agent's token
and refresh token at once (issue 65).
A client of 2026-07-28 discovers the server (server/discover) through the gateway, and a method the
gateway does not pass is answered as that revision's transport requires (404, -32601).
Token exchange (issue 66): a tool behind a route with `upstream_credential: {exchange: ...}` gets, as
Authorization, a token the test provider exchanged (RFC 8693) for the person for its API's audience.
Connected accounts (issue 66): the SDK's client calls a tool behind a route with
`upstream_credential: {connection: docs}` for a person who has not connected Acme Docs (a real OAuth
service: Authlib's authorization server, Tests/MCP/oauth_service.py). It is answered with a URL
elicitation (-32042); the person opens its link in Chromium, connects at the service, and the client
hears `notifications/elicitation/complete` on its GET stream; retried, the FastMCP tool reads the
person's own documents at the service with the token the gateway sent, and the link is used up.
Enterprise-managed authorization (issue 66): the SDK's `IdentityAssertionOAuthProvider`, a confidential
client, gets an ID-JAG from the test provider (RFC 8693 exchange of the agent's ID token there) and
presents it to the gateway's token endpoint; its tool call reaches the server as the provider's person,
with no consent page; the same ID-JAG presented again is refused.

Environment: GATEWAY (http://127.0.0.1:PORT), CHROMIUM, CALLBACK_PORT, CLIENT_METADATA_URL, SSO (the test provider's URL),
TOOLS (the FastMCP server's own URL, asked what it observed).
"""
import asyncio
import json
import re
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import httpx2
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Traces"))
from otlp_receiver import OTLPReceiver, attributes  # noqa: E402  (the shared receiver, beside the traces test)

GATEWAY = os.environ["GATEWAY"]
# The gateway sends its spans here (`tracing.endpoint` in scripts/mcp-tests.sh).
TRACES = OTLPReceiver(int(os.environ["OTLP_PORT"]))
CALLBACK = f"http://127.0.0.1:{os.environ['CALLBACK_PORT']}/callback"
FAILURES = []


def cancelled_at_server(request_id, since, within=3.0):
    """When the MCP server saw the `slow` call `request_id` cancelled (wall clock), polling its own /observed; None if not within `within` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        with urllib.request.urlopen(os.environ["TOOLS"] + "/observed", timeout=5) as answer:
            for seen in json.loads(answer.read())["cancelled"]:
                if seen["request_id"] == str(request_id) and seen["at"] >= since:
                    return seen["at"]
        time.sleep(0.05)
    return None


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

    def __init__(self, page, expected_client, server="/mcp/tools"):
        self.page, self.result, self.pages, self.expected_client, self.server, self.scopes = page, None, [], expected_client, server, []

    async def redirect(self, url: str):
        check(url.startswith(GATEWAY + "/api/auth/oauth/authorize?"), "the client is sent to the gateway's authorization endpoint")
        asked = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        self.scopes.append(asked.get("scope", [""])[0])
        check(asked.get("code_challenge_method") == ["S256"] and asked.get("resource") == [GATEWAY + self.server], "with PKCE S256 and resource = the route's canonical URL")
        captured = asyncio.get_running_loop().create_future()

        async def callback(route):
            if not captured.done():
                captured.set_result(route.request.url)
            await route.fulfill(status=200, content_type="text/html", body="<!doctype html><title>done</title>")

        await self.page.route(CALLBACK + "*", callback)
        await self.page.goto(url)
        if "Company IdP" in await self.page.title():
            await self.page.click("#approve")
        await self.page.wait_for_selector("button[value=allow]", timeout=15000)
        content = await self.page.content()
        self.pages.append(content)
        check("Allow access?" in content and self.expected_client in content and self.server in content,
              f"the consent page names the client ({self.expected_client}), the MCP server and its scope")
        check("Sign out</a> and sign in as yourself" in content, "and offers the person signed in to sign out (Not you?)")
        await self.page.click("button[value=allow]")
        back = urllib.parse.urlsplit(await asyncio.wait_for(captured, 15))
        # The page must have landed on the callback before this returns: the client may send it to
        # the authorization endpoint again at once (a step-up), and a goto issued while this
        # navigation is still committing is "interrupted by another navigation" (seen in CI under load).
        await self.page.wait_for_url(CALLBACK + "*", wait_until="load", timeout=15000)
        await self.page.unroute(CALLBACK + "*", callback)
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


def sdk_provider(server, person, storage, client_metadata_url=None):
    """The SDK's OAuth client for the MCP route at `server`, its person in Chromium (`Browser`)."""
    return OAuthClientProvider(
        server_url=GATEWAY + server,
        client_metadata=OAuthClientMetadata(client_name="SDK test agent", redirect_uris=[CALLBACK], grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"]),
        storage=storage, redirect_handler=person.redirect, callback_handler=person.callback, client_metadata_url=client_metadata_url)


def check_tool_call_span(client_id):
    """The tool call's span (OpenTelemetry's MCP conventions): named for the call, with the method,
    the tool, the session, the client and the decision; never the call's arguments."""
    found = TRACES.wait(lambda _, span: span.name == "tools/call add" and attributes(span).get("portcullis.client_id") == client_id)
    check(len(found) >= 1, "the tool call is traced: a span named tools/call add, for this client")
    if not found:
        return
    attrs = attributes(found[-1][1])
    check(attrs.get("mcp.method.name") == "tools/call" and attrs.get("gen_ai.tool.name") == "add"
          and attrs.get("gen_ai.operation.name") == "execute_tool", "the tool call's span carries mcp.method.name and gen_ai.tool.name")
    check(attrs.get("portcullis.decision") == "allowed" and (attrs.get("user.id") or "").startswith("ext_")
          and attrs.get("mcp.session.id"), "the tool call's span names the decision, the person and the MCP session")
    check(b'"a": 2' not in TRACES.exported() and b'"b":40' not in TRACES.exported() and attrs.get("http.route") == "/mcp/tools",
          "the tool call's span carries the route, not the call's arguments")


async def flow(page, client_metadata_url, expected_client):
    kind = "CIMD" if client_metadata_url else "RFC 7591"
    print(f"--- the SDK's client, registering by {kind}")
    person = Browser(page, expected_client)
    storage = MemoryStorage()
    provider = sdk_provider("/mcp/tools", person, storage, client_metadata_url)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/tools", http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name for tool in (await session.list_tools()).tools}
                check({"add", "whoami", "slow"} <= tools, "tools/list through the gateway")
                added = await session.call_tool("add", {"a": 2, "b": 40})
                check(not added.is_error and "42" in json.dumps([c.model_dump() for c in added.content]), "tools/call answered (2 + 40)")
                check_tool_call_span(storage.client.client_id)
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
    if status == 200:
        refreshed = json.loads(body)
        storage.tokens = OAuthToken(access_token=refreshed["access_token"], token_type="Bearer", refresh_token=refreshed["refresh_token"], scope=refreshed.get("scope"))
    return storage


async def modern(storage):
    """A client of 2026-07-28 (the SDK's newest revision): server/discover, a call, and the gateway's refusal of a
    method it does not pass as that revision's transport says a server answers one it lacks (404, -32601)."""
    print("--- the SDK's client speaking 2026-07-28")
    headers = {"Authorization": "Bearer " + storage.tokens.access_token}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/tools", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                try:
                    found = await session.discover()
                    versions = found.supported_versions
                except Exception as error:  # the gateway's refusal, before the fix: -31403
                    versions = f"refused: {error}"
                check(isinstance(versions, list) and "2026-07-28" in versions, f"server/discover passes the gateway ({versions})")
                added = await session.call_tool("add", {"a": 1, "b": 41})
                check(not added.is_error and "42" in json.dumps([c.model_dump() for c in added.content]), "a tools/call at 2026-07-28 is answered")
    # Written from the transport page: a method the server does not implement is 404 with -32601, which the SDK reads as such.
    unknown = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "x-acme/reset", "params": {}}).encode()
    for version, expected in (("2026-07-28", 404), ("2025-11-25", 200)):
        status, _, body = raw("POST", "/mcp/tools", token=storage.tokens.access_token, body=unknown,
                              headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                       "MCP-Protocol-Version": version, "Mcp-Method": "x-acme/reset"})
        answer = json.loads(body or b"{}")
        check(status == expected and answer.get("error", {}).get("code") == -32601 and answer.get("id") == 9,
              f"a method the gateway does not pass is {expected} with -32601 Method not found at {version} ({status}, {answer.get('error', {}).get('code')})")


async def exchanged(page):
    """Token exchange (issue 66): a route that acts as the person with a token their provider exchanges for its API."""
    print("--- a route acting as the person with a token the provider exchanged (RFC 8693)")
    person = Browser(page, "registered itself: unverified", server="/mcp/reports")
    storage = MemoryStorage()
    provider = sdk_provider("/mcp/reports", person, storage)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/reports", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                seen = [json.loads((await session.call_tool("whoami", {})).content[0].text) for _ in range(2)]
    # The first exchange's latency: a browser route exchanging for another audience, asked in the person's browser.
    took = []
    for _ in range(4):
        started = time.monotonic()
        answer = await page.request.get(GATEWAY + "/reports-api")
        took.append((time.monotonic() - started) * 1000)
        check(answer.status == 200, f"the browser route with an exchange answers ({answer.status})")
    print(f"      a browser request with the first exchange at the provider: {took[0]:.1f} ms; the next, the token from memory: "
          + ", ".join(f"{value:.1f}" for value in took[1:]) + " ms")
    bearer = seen[0].get("bearer") or {}
    check(bearer.get("iss") == os.environ["SSO"] and bearer.get("aud") == "api://reports" and bearer.get("scope") == "reports.read",
          f"the server gets a token the provider exchanged for its audience ({bearer.get('aud')}, {bearer.get('scope')})")
    check(bearer.get("sub") == "browser-sso-user" and bearer.get("act", {}).get("sub") == "portcullis",
          "for the person who signed in, with the gateway as the actor")
    check(seen[1].get("bearer", {}).get("jti") == bearer.get("jti"), "the next call carries the same token (kept per person and audience)")
    check((seen[0].get("sub") or "").startswith("ext_"), "beside the gateway's assertion naming the person")


async def connected(page):
    """Connected accounts (issue 66): a URL elicitation, the person connecting in Chromium, the end told on the client's stream."""
    print("--- a tool acting as the person at a service they connect from the agent's URL elicitation (Authlib)")
    person = Browser(page, "registered itself: unverified", server="/mcp/docs")
    provider = sdk_provider("/mcp/docs", person, MemoryStorage())
    completed = []

    async def on_message(message):
        notification = getattr(message, "root", message)
        if getattr(notification, "method", None) == "notifications/elicitation/complete":
            completed.append(notification.params.elicitation_id)

    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/docs", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
                started = await session.initialize()
                check(started.protocol_version == "2025-11-25", f"the session speaks 2025-11-25 ({started.protocol_version})")
                try:
                    await session.call_tool("my_documents", {})
                    elicitation = {}
                    check(False, "a person who has not connected the service is asked to")
                except MCPError as error:
                    elicitations = (error.data or {}).get("elicitations") or [{}]
                    elicitation = elicitations[0]
                    check(error.code == -32042 and elicitation.get("mode") == "url" and elicitation.get("elicitationId"),
                          f"the call is answered with a URL elicitation (-32042, {error.code})")
                link = elicitation.get("url", "")
                check(link.startswith(GATEWAY + "/.portcullis/connect/docs?elicitation="), "its link is the gateway's connect page, not the service")
                check(not completed, "nothing is told before the person connects")
                # The person opens the link in their browser (signed in at the gateway already), connects, approves at the service.
                await page.goto(link)
                check("Connect Acme Docs" in await page.title(), f"the link opens the connect page ({await page.title()})")
                await page.click("#connect")
                await page.wait_for_selector("#approve", timeout=15000)
                check(page.url.startswith(os.environ["SERVICE"] + "/oauth/authorize?"), "the browser is at the service's own sign-in")
                await page.click("#approve")
                await page.wait_for_url(GATEWAY + "/**", timeout=15000)
                connected_at = time.monotonic()
                title = await page.title()
                check(title == "Acme Docs connected", f"back at the gateway, the person is told it is connected ({title})")
                check("code=" not in page.url and "state=" not in page.url and "/connected?" in page.url,
                      "the address left in the browser holds neither the service's code nor the state")
                while not completed and time.monotonic() - connected_at < 5:
                    await asyncio.sleep(0.05)
                check(completed == [elicitation.get("elicitationId")],
                      f"the client hears notifications/elicitation/complete for its elicitation on its stream "
                      f"({'%.2f s after connecting' % (time.monotonic() - connected_at) if completed else 'not within 5 s'})")
                answer = await session.call_tool("my_documents", {})
                documents = json.loads(answer.content[0].text)
                check(documents.get("status") == 200 and documents.get("user") == "alice-docs" and "Alice's notes" in documents.get("documents", []),
                      f"retried, the tool reads the person's own documents at the service with the token the gateway sent ({documents.get('status')})")
    with urllib.request.urlopen(os.environ["SERVICE"] + "/observed", timeout=5) as answer:
        observed = json.loads(answer.read())
    check(observed["issued"] == 1 and observed["api"] == ["alice-docs"], f"the service issued one token and answered its API once, as the person ({observed})")
    await page.goto(link)
    check("connect_elicitation_unknown" in await page.content(), "once connected, the link is used up")


async def enterprise():
    """The SDK's ID-JAG client: the company's provider decides, the gateway checks, no consent page."""
    print("--- enterprise-managed authorization (ID-JAG) with the SDK's IdentityAssertionOAuthProvider")
    sso = os.environ["SSO"]
    secret = open(os.environ["ENTERPRISE_SECRET_FILE"]).read().strip()
    given = []

    async def fetch_id_jag(audience, resource):
        async with httpx2.AsyncClient(timeout=10) as http:
            id_token = (await http.post(sso + "/test/id-token")).json()["id_token"]
            answer = await http.post(sso + "/token", data={
                "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange", "client_id": "ci-agent", "client_secret": secret,
                "subject_token": id_token, "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag", "audience": audience, "resource": resource, "scope": "tools"})
            assertion = answer.json()["access_token"]
            given.append(assertion)
            return assertion

    status, _, body = raw("GET", "/.well-known/oauth-authorization-server")
    metadata = json.loads(body)
    check("urn:ietf:params:oauth:grant-type:jwt-bearer" in metadata.get("grant_types_supported", []) and
          metadata.get("authorization_grant_profiles_supported") == ["urn:ietf:params:oauth:grant-profile:id-jag"],
          "the metadata offers the jwt-bearer grant and the id-jag profile")
    storage = MemoryStorage()
    auth = IdentityAssertionOAuthProvider(
        server_url=GATEWAY + "/mcp/tools", storage=storage, client_id="ci-agent", client_secret=secret, issuer=GATEWAY,
        assertion_provider=fetch_id_jag, scope="tools")
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/tools", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                who = await session.call_tool("whoami", {})
                seen = json.loads(who.content[0].text) if not who.is_error else {}
                check(seen.get("client_id") == "ci-agent" and (seen.get("sub") or "").startswith("ext_") and seen.get("authorization") is False,
                      f"the tool call reaches the server as the provider's person, for ci-agent, without the client's token ({seen})")
    check(len(given) == 1 and storage.tokens is not None and storage.tokens.refresh_token is None,
          "one ID-JAG was exchanged for an access token, with no refresh token")
    replay = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": given[0], "client_id": "ci-agent",
                                     "client_secret": secret, "resource": GATEWAY + "/mcp/tools"}).encode()
    status, _, body = raw("POST", "/api/auth/oauth/token", body=replay, headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 400 and json.loads(body).get("error") == "invalid_grant", f"the same ID-JAG presented again is refused ({status})")


async def guarded(page, client_metadata_url):
    """A route with rules per tool: add for anyone, whoami for admins only, slow with the scope tools:slow."""
    print("--- rules per tool, with the SDK's client")
    person = Browser(page, "described by localhost", server="/mcp/guarded")
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=GATEWAY + "/mcp/guarded",
        client_metadata=OAuthClientMetadata(client_name="SDK test agent", redirect_uris=[CALLBACK], grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"]),
        storage=storage, redirect_handler=person.redirect, callback_handler=person.callback, client_metadata_url=client_metadata_url)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(GATEWAY + "/mcp/guarded", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                tools = sorted(tool.name for tool in (await session.list_tools()).tools)
                check(tools == ["add", "slow"], f"tools/list is filtered to what the person may call, the step-up tool kept ({tools})")
                added = await session.call_tool("add", {"a": 1, "b": 2})
                check(not added.is_error and "3" in json.dumps([c.model_dump() for c in added.content]), "an allowed tool is called")
                try:
                    refused = await session.call_tool("whoami", {})
                    message = json.dumps([c.model_dump() for c in refused.content]) if refused.is_error else ""
                except Exception as error:  # McpError: the JSON-RPC error the gateway answered with
                    message = str(error)
                check("whoami" in message and "not open to you" in message and "containing" not in message, f"a tool the person may never call is the JSON-RPC error the client shows ({message[:120]})")
                check(person.scopes == ["tools"], f"the first authorization asked for the route's scope only ({person.scopes})")
                result = await session.call_tool("slow", {"steps": 1, "delay": 0.1})
                check(not result.is_error, "the step-up tool is called once the person granted its scope")
                check(len(person.scopes) == 2 and "tools:slow" in person.scopes[1].split(), f"the 403 insufficient_scope sent the person back to consent to tools:slow ({person.scopes})")
                check(sum("tools:slow" in page for page in person.pages) == 1, "the second consent page names the new scope")
    # The same filtering over HTTP/2, raw: the answer's length rewritten in its HEADERS.
    async with httpx2.AsyncClient(timeout=30, http1=False, http2=True) as http:
        headers = {"Authorization": "Bearer " + storage.tokens.access_token, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
        opened = await http.post(GATEWAY + "/mcp/guarded", headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        headers["Mcp-Session-Id"] = opened.headers.get("mcp-session-id", "")
        listed = await http.post(GATEWAY + "/mcp/guarded", headers=headers | {"Mcp-Method": "tools/list"}, json={"jsonrpc": "2.0", "id": "h2", "method": "tools/list"})
        text = listed.text
        names = []
        for line in text.splitlines():
            if line.startswith("data:"):
                names = [tool["name"] for tool in json.loads(line[5:]).get("result", {}).get("tools", [])] or names
        if not names and text.startswith("{"):
            names = [tool["name"] for tool in json.loads(text)["result"]["tools"]]
        check(listed.http_version == "HTTP/2" and sorted(names) == ["add", "slow"], f"over HTTP/2 the list is filtered too ({listed.http_version}, {names})")
    return storage


async def backchannel(storage):
    """The provider's back-channel logout ends the person's session: the agent's stream ends, its token is refused."""
    print("--- the provider's back-channel logout")
    access = storage.tokens.access_token
    ended = {}

    async def hold():
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = {"Authorization": "Bearer " + access, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
            opened = await http.post(GATEWAY + "/mcp/guarded", headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
            headers["Mcp-Session-Id"] = opened.headers.get("mcp-session-id", "")
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 20, "delay": 0.5}, "_meta": {"progressToken": 2}}}
            async with http.stream("POST", GATEWAY + "/mcp/guarded", json=body, headers=headers) as answer:
                ended["text"] = ""
                try:
                    async for chunk in answer.aiter_text():
                        ended["text"] += chunk
                except Exception as error:
                    ended["error"] = repr(error)
                ended["at"] = time.monotonic()

    task = asyncio.create_task(hold())
    for _ in range(100):
        if "progress" in ended.get("text", ""):
            break
        await asyncio.sleep(0.05)
    check("progress" in ended.get("text", ""), "the agent holds an SSE stream (a slow tool's progress)")
    sent_at, sent_wall = time.monotonic(), time.time()
    with urllib.request.urlopen(urllib.request.Request(os.environ["SSO"] + "/test/backchannel-logout", data=b"", method="POST"), timeout=10) as answer:
        status = json.loads(answer.read()).get("gateway_status")
    check(status == 200, f"the provider's logout token was taken ({status})")
    await asyncio.wait_for(task, 10)
    seen = cancelled_at_server(2, sent_wall - 1)
    check(seen is not None and seen - sent_wall < 1.0,
          f"the MCP server observed the slow tool's cancellation {'never' if seen is None else f'{seen - sent_wall:.2f} s'} after the back-channel logout")
    seconds = ended["at"] - sent_at
    between = ended["text"].endswith("\n\n") or ended["text"].endswith("\r\n\r\n")
    check(seconds < 1.0 and "error" not in ended and between, f"the stream ended {seconds:.2f} s after the back-channel logout, between two events")
    status, headers, _ = raw("POST", "/mcp/guarded", token=access, body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                             headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    check(status == 401, f"the agent's next call is refused ({status})")


async def agents_page(page, storage_tools):
    """The person's own page: the grants listed; one revoked while its agent holds an HTTP/2 SSE stream."""
    print("--- the person's page of agents, in Chromium")
    await page.goto(GATEWAY + "/.portcullis/agents")
    content = await page.content()
    check("Agents with access" in content and "SDK test agent" in content and "/mcp/tools" in content and "/mcp/guarded" in content and "tools:slow" in content,
          "the page lists the agent's grants: the client, the MCP servers and the scopes")
    check("described by localhost" in content and "last used" in content, "with the client's metadata host and when it was last used")
    access = storage_tools.tokens.access_token
    ended = {}

    async def hold():
        async with httpx2.AsyncClient(timeout=30, http1=False, http2=True) as http:
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 20, "delay": 0.5}, "_meta": {"progressToken": 9}}}
            headers = {"Authorization": "Bearer " + access, "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                       "MCP-Protocol-Version": "2025-11-25"}
            session_id = ended.get("session")
            if session_id:
                headers["Mcp-Session-Id"] = session_id
            async with http.stream("POST", GATEWAY + "/mcp/tools", json=body, headers=headers) as answer:
                ended["version"] = answer.http_version
                ended["text"] = ""
                try:
                    async for chunk in answer.aiter_text():
                        ended["text"] += chunk
                except Exception as error:
                    ended["error"] = repr(error)
                ended["at"] = time.monotonic()

    # The stream needs an MCP session of the server's: initialize one over the same token.
    status, headers, _ = raw("POST", "/mcp/tools", token=access, body=json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    ended["session"] = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
    check(status == 200 and ended["session"], f"an MCP session is opened for the stream ({status})")
    task = asyncio.create_task(hold())
    for _ in range(100):
        if "progress" in ended.get("text", ""):
            break
        await asyncio.sleep(0.05)
    check(ended.get("version") == "HTTP/2" and "progress" in ended.get("text", ""), f"the agent holds an SSE stream over HTTP/2 ({ended.get('version')})")
    # The metadata-document client's grant for /mcp/tools (the self-registered one has a grant there too).
    section = page.locator("section.agent").filter(has_text="/mcp/tools").filter(has_text="described by localhost")
    check(await section.count() == 1, "one grant of that client for that server")
    revoked_at, revoked_wall = time.monotonic(), time.time()
    await section.locator("button", has_text="Revoke").click()
    await page.wait_for_load_state()
    await asyncio.wait_for(task, 10)
    seen = cancelled_at_server(9, revoked_wall - 1)
    check(seen is not None and seen - revoked_wall < 1.0,
          f"the MCP server observed the slow tool's cancellation {'never' if seen is None else f'{seen - revoked_wall:.2f} s'} after the revoke (within a second)")
    seconds = ended["at"] - revoked_at
    between = ended["text"].endswith("\n\n") or ended["text"].endswith("\r\n\r\n")
    check(seconds < 1.0 and "error" not in ended and between,
          f"the stream ended {seconds:.2f} s after the revoke, between two events ({ended.get('error', 'cleanly')}, ends {ended['text'][-12:]!r})")
    content = await page.content()
    check("Access withdrawn" in content and "/mcp/guarded" in content and page.url.startswith(GATEWAY + "/.portcullis/agents"), "the page says so and lists the other grant still")
    status, headers, _ = raw("POST", "/mcp/tools", token=access, body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                             headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    check(status == 401 and "resource_metadata=" in headers.get("WWW-Authenticate", ""), f"the agent's next call is refused (401, {status})")
    form = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": storage_tools.tokens.refresh_token, "client_id": storage_tools.client.client_id}).encode()
    status, _, _ = raw("POST", "/api/auth/oauth/token", body=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 400, "and its refresh token no longer works")
    # Another site's form cannot revoke: no nonce, another origin.
    status, _, _ = raw("POST", "/.portcullis/agents/revoke", body=b"client_id=x&resource=y&nonce=z",
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"})
    check(status == 403, "a revoke from another site is refused (403)")


async def sign_out(page):
    """The sign-out control on the agents page: it says what it ends, ends every agent's access and the provider's session."""
    print("--- signing out from the person's page, in Chromium")
    storage = await flow(page, client_metadata_url=None, expected_client="registered itself: unverified")
    await page.goto(GATEWAY + "/.portcullis/agents")
    content = await page.content()
    check("ends the access of every agent you authorized while signed in here" in content and "revoke it above instead" in content,
          "the agents page says that signing out ends every agent's access, and offers revoking one instead")
    await page.click("#sign-out")
    await page.wait_for_url(re.compile(re.escape(os.environ["SSO"]) + "/logout"), timeout=10000)
    asked = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    check(asked.get("post_logout_redirect_uri") == [GATEWAY + "/"] and "id_token_hint" in asked,
          "the button signs out at the provider too (its end-session page, the form's redirect let through by the page's form-action), back to the registered {public_url}/")
    await page.goto(GATEWAY + "/.portcullis/sign_out")
    check("Signed out" in await page.title() and "not signed in" in await page.content(), "the gateway's sign-out page says the browser is signed out")
    # The revocation reaches the data plane through the access-change feed (SQLite: read every 0.5 s).
    deadline = time.monotonic() + 1.5
    while True:
        status, _, _ = raw("POST", "/mcp/tools", token=storage.tokens.access_token, body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                           headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        if status == 401 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    check(status == 401, f"the agent's token is refused within a second or so ({status})")
    form = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": storage.tokens.refresh_token, "client_id": storage.client.client_id}).encode()
    status, _, _ = raw("POST", "/api/auth/oauth/token", body=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    check(status == 400, f"and its refresh token ({status})")
    await page.goto(GATEWAY + "/.portcullis/agents")
    check("Company IdP" in await page.title(), "the agents page now asks to sign in")


async def main():
    status, headers, _ = raw("POST", "/mcp/tools", body=b"{}", headers={"Content-Type": "application/json"})
    check(status == 401 and 'resource_metadata="' + GATEWAY + '/.well-known/oauth-protected-resource/mcp/tools"' in headers.get("WWW-Authenticate", ""),
          "a request without a token is 401 naming resource_metadata")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = await browser.new_page()
        # First with a Client ID Metadata Document (the 2025-11-25 default), then by registration.
        tools_storage = await flow(page, client_metadata_url=os.environ["CLIENT_METADATA_URL"], expected_client="described by localhost")
        await modern(tools_storage)
        await enterprise()
        await flow(page, client_metadata_url=None, expected_client="registered itself: unverified")
        await exchanged(page)
        await connected(page)
        guarded_storage = await guarded(page, os.environ["CLIENT_METADATA_URL"])
        await agents_page(page, tools_storage)
        await backchannel(guarded_storage)
        await sign_out(page)
        await browser.close()
    if FAILURES:
        print(f"{len(FAILURES)} failed")
        sys.exit(1)


asyncio.run(main())
