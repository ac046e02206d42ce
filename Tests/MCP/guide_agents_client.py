"""An MCP client as docs/guides/agents-act-as-their-person.md has the reader use one (scripts/guides-test.py runs it).

The official MCP SDK's client, given only http://127.0.0.1:8080/mcp/docs, registers itself, and
alice signs in on the gateway's account form in Chromium and allows it. Its call of `my_documents`
is answered with a URL elicitation; alice opens its link in the same browser, presses Connect Acme
Docs and approves at Acme Docs (the guide's service.py); the client hears
notifications/elicitation/complete on its stream and calls again, and the tool answers with her
documents there. Prints `elicitation: -32042`, `notified: yes` and `my_documents: alice-docs ...` when it worked.

Environment: CHROMIUM, PASSWORD.
"""
import asyncio
import json
import os
import time

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from playwright.async_api import async_playwright

from guide_client import signing_in_provider

SERVER = "http://127.0.0.1:8080/mcp/docs"
CALLBACK = "http://127.0.0.1:18751/callback"


async def main():
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = await browser.new_page()
        completed = []

        async def on_message(message):
            notification = getattr(message, "root", message)
            if getattr(notification, "method", None) == "notifications/elicitation/complete":
                completed.append(notification.params.elicitation_id)

        async with httpx2.AsyncClient(auth=signing_in_provider(SERVER, CALLBACK, page), timeout=30) as http:
            async with streamable_http_client(SERVER, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
                    await session.initialize()
                    try:
                        await session.call_tool("my_documents", {})
                        print("elicitation: none")
                        return
                    except MCPError as error:
                        elicitation = ((error.data or {}).get("elicitations") or [{}])[0]
                        print("elicitation:", error.code)
                    # Alice, in her browser: the link, Connect, Approve at Acme Docs.
                    await page.goto(elicitation["url"])
                    await page.click("#connect")
                    await page.click("#approve")
                    await page.wait_for_url("http://127.0.0.1:8080/**", timeout=15000)
                    print("page:", await page.title())
                    waited = time.monotonic()
                    while not completed and time.monotonic() - waited < 5:
                        await asyncio.sleep(0.05)
                    print("notified:", "yes" if completed == [elicitation.get("elicitationId")] else "no")
                    answer = json.loads((await session.call_tool("my_documents", {})).content[0].text)
                    print("my_documents:", answer.get("user"), ", ".join(answer.get("documents", [])))
        await browser.close()


asyncio.run(main())
