"""The demo page and the browser client over HTTP/2, in Chromium (Playwright for Python, Debian's
chromium by its path), against `portcullis serve` with gateway.tls (ALPN h2), started by
scripts/http2-tests.sh. The page's own performance entries say which protocol carried each
response; the agent socket opens on an HTTP/1.1 connection of its own and answers an intent.
"""
import json
import os
import sys

from playwright.sync_api import sync_playwright

BASE = os.environ["PORTCULLIS_TLS_URL"]
PASSWORD = os.environ["PORTCULLIS_PASSWORD"]


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
    context = browser.new_context(ignore_https_errors=True)  # the test's own self-signed certificate
    page = context.new_page()
    page.goto(BASE + "/demo/")
    navigation = page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol")
    check(navigation == "h2", f"the demo page came over HTTP/2 ({navigation})")
    script = page.evaluate("performance.getEntriesByType('resource').filter(e => e.name.includes('/client/portcullis.js')).map(e => e.nextHopProtocol)")
    check(script and all(protocol == "h2" for protocol in script), f"the client module came over HTTP/2 ({script})")
    result = page.evaluate("""async ([base, password]) => {
        const { PortcullisClient } = await import(base + "/client/portcullis.js");
        const client = new PortcullisClient({ baseUrl: base });
        await client.start();
        await client.login({ username: "browser", password });
        const agent = client.agent();
        const answer = await agent.request("echo", { hello: "over h2" });
        const api = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/')).map(e => e.nextHopProtocol);
        return { answer, api };
    }""", [BASE, PASSWORD])
    check(result["answer"] == {"hello": "over h2"}, f"the agent socket (its own HTTP/1.1 connection) answers an intent: {result['answer']}")
    check(result["api"] and all(protocol == "h2" for protocol in result["api"]), f"the client's API calls went over HTTP/2 ({result['api']})")
    browser.close()
