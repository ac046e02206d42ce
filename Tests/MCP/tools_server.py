"""The MCP server behind the gateway in scripts/mcp-tests.sh: FastMCP over Streamable HTTP.

Tools: `add` (a JSON-RPC answer), `whoami` (what reached the server: never the client's token,
always the gateway's assertion, read here without verifying, which a test may do, and on a route
that acts as the person the claims of the token the gateway sent for them) and `slow`
(progress notifications spaced out on one SSE answer, so that a test can see each event pass
the gateway as it comes, and the stream outlive the gateway's idle timeout), and `my_documents` (the
person's own documents at a service they connected, Tests/MCP/oauth_service.py, read with the token
the gateway sent for them: the server keeps no credential of its own). A `slow` call the
server is told to stop (its task cancelled: `notifications/cancelled`, or a disconnect its SDK
takes as one) is recorded with the wall-clock time, and `GET /observed` lists those: what a test
reads to see that ending access at the gateway ended the work here.

Run: tools_server.py PORT [SERVICE_URL]
"""
import asyncio
import base64
import json
import sys
import time
import urllib.error
import urllib.request

from fastmcp import Context, FastMCP
from fastmcp.server.dependencies import get_http_headers

mcp = FastMCP("tools")
CANCELLED = []
SERVICE = sys.argv[2] if len(sys.argv) > 2 else None


@mcp.tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@mcp.tool
def whoami() -> dict:
    """What the request that reached the server carried."""
    headers = get_http_headers(include_all=True)
    assertion = headers.get("x-portcullis-assertion", "")
    claims = {}
    if assertion.count(".") == 2:
        payload = assertion.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    # A route that acts as the person (upstream_credential) sends their token there: its claims, read without verifying.
    bearer = None
    authorization = headers.get("authorization", "")
    if authorization.startswith("Bearer ") and authorization.count(".") == 2:
        payload = authorization.split(".")[1]
        bearer = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return {"authorization": "authorization" in headers, "sub": claims.get("sub"), "client_id": claims.get("client_id"), "aud": claims.get("aud"),
            "bearer": bearer}


@mcp.tool
async def slow(steps: int, delay: float, ctx: Context) -> str:
    """Reports progress `steps` times, `delay` seconds apart, then answers."""
    try:
        for step in range(steps):
            await ctx.report_progress(step + 1, steps)
            await asyncio.sleep(delay)
    except asyncio.CancelledError:
        CANCELLED.append({"tool": "slow", "at": time.time(), "request_id": str(ctx.request_id)})
        raise
    return "done"


@mcp.tool
async def my_documents() -> dict:
    """The caller's documents at Acme Docs, asked as them with the token the gateway sent."""
    authorization = get_http_headers(include_all=True).get("authorization", "")

    def fetch():
        request = urllib.request.Request(SERVICE + "/api/me", headers={"Authorization": authorization})
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return {"status": answer.status, **json.loads(answer.read())}
        except urllib.error.HTTPError as error:
            return {"status": error.code}

    return await asyncio.to_thread(fetch)


@mcp.custom_route("/observed", methods=["GET"])
async def observed(request):
    """The `slow` calls cancelled so far (not through the gateway: the test asks the server itself)."""
    from starlette.responses import JSONResponse
    return JSONResponse({"cancelled": CANCELLED})


if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), path="/mcp", show_banner=False)
