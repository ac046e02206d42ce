"""An MCP client as docs/guides/mcp.md has the reader point one at the gateway (scripts/guides-test.py runs it).

The official MCP SDK's client, given only http://127.0.0.1:8080/mcp/tools, registers itself,
and a person in Chromium signs in on the gateway's account form as alice and allows it; then
it calls the guide's `add` tool. Prints `add: 42` when it worked.

Environment: CHROMIUM, PASSWORD.
"""
import asyncio
import os
import urllib.parse

import httpx2
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import async_playwright

SERVER = "http://127.0.0.1:8080/mcp/tools"
CALLBACK = "http://127.0.0.1:18750/callback"


class Memory(TokenStorage):
    tokens = client = None

    async def get_tokens(self): return self.tokens
    async def set_tokens(self, tokens): self.tokens = tokens
    async def get_client_info(self): return self.client
    async def set_client_info(self, info): self.client = info


def signing_in_provider(server, callback, page):
    """The SDK's OAuth client for `server`, registering itself; its person, in Chromium's `page`,
    signs in on the gateway's account form as alice and allows it (also used by guide_agents_client.py)."""
    result = {}

    async def redirect(url):
        captured = asyncio.get_running_loop().create_future()

        async def back(route):
            if not captured.done():
                captured.set_result(route.request.url)
            await route.fulfill(status=200, body="done")

        await page.route(callback + "*", back)
        await page.goto(url)
        await page.fill("#username", "alice")
        await page.fill("#password", os.environ["PASSWORD"])
        await page.click("button[type=submit]")
        await page.click("button[value=allow]")
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(await asyncio.wait_for(captured, 15)).query)
        # Landed on the callback before the client may navigate again (as Tests/MCP/test_mcp.py's Browser does).
        await page.wait_for_url(callback + "*", wait_until="load", timeout=15000)
        await page.unroute(callback + "*", back)
        result["code"] = AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0], iss=query.get("iss", [None])[0])

    async def code():
        return result["code"]

    return OAuthClientProvider(
        server_url=server, client_metadata=OAuthClientMetadata(client_name="Guide client", redirect_uris=[callback]), storage=Memory(),
        redirect_handler=redirect, callback_handler=code)


async def main():
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = await browser.new_page()
        async with httpx2.AsyncClient(auth=signing_in_provider(SERVER, CALLBACK, page), timeout=30) as http:
            async with streamable_http_client(SERVER, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    answer = await session.call_tool("add", {"a": 2, "b": 40})
                    print("add:", answer.content[0].text)
        await browser.close()


if __name__ == "__main__":
    asyncio.run(main())
