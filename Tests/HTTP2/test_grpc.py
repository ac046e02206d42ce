"""gRPC through the gateway, read by Python's grpcio client (h2c with prior knowledge, what
`grpc.insecure_channel` speaks), against the real `portcullis serve` started by
scripts/http2-tests.sh. Each refusal is read by the client as its gRPC status code, with the
gateway's stable error code in the status's details. Prints one line per check (never a token).
"""
import json
import os
import secrets
import sys
import urllib.error
import urllib.request

import grpc

PORT = int(os.environ["PORTCULLIS_PORT"])
TOKEN = open(os.environ["PORTCULLIS_TOKEN_FILE"]).read().strip()
TARGET = f"127.0.0.1:{PORT}"


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def call(method, metadata=(), request=b"hello", timeout=15):
    """A unary call with raw bytes as the message (no generated code); the status it ends with."""
    with grpc.insecure_channel(TARGET) as channel:
        stub = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            stub(request, metadata=list(metadata), timeout=timeout)
            return grpc.StatusCode.OK, ""
        except grpc.RpcError as error:
            return error.code(), error.details() or ""


bearer = [("authorization", "Bearer " + TOKEN)]

code, details = call("/down.Service/Call")
check(code == grpc.StatusCode.UNAUTHENTICATED and "token_missing" in details, f"no token: UNAUTHENTICATED, token_missing ({code}, {details!r})")
code, details = call("/down.Service/Call", [("authorization", "Bearer not.a.token")])
check(code == grpc.StatusCode.UNAUTHENTICATED and "token_invalid" in details, f"a bad token: UNAUTHENTICATED, token_invalid ({code}, {details!r})")
code, details = call("/policy.Service/Call", bearer)
check(code == grpc.StatusCode.PERMISSION_DENIED and "insufficient_scope" in details, f"a policy the token fails: PERMISSION_DENIED ({code}, {details!r})")
code, details = call("/down.Service/Call", bearer)
check(code == grpc.StatusCode.UNAVAILABLE and "upstream_unavailable" in details, f"an upstream that is down: UNAVAILABLE ({code}, {details!r})")
code, details = call("/hung.Service/Call", bearer)
check(code == grpc.StatusCode.DEADLINE_EXCEEDED and "upstream_timeout" in details, f"an upstream that never answers: DEADLINE_EXCEEDED ({code}, {details!r})")
code, details = call("/hung.Service/Call", bearer, request=b"x" * 200_000)
check(code == grpc.StatusCode.RESOURCE_EXHAUSTED and "payload_too_large" in details, f"a message past gateway.max_body_bytes: RESOURCE_EXHAUSTED ({code}, {details!r})")
code, details = call("/down.Service/a%00b", bearer)
check(code == grpc.StatusCode.INVALID_ARGUMENT and "invalid_request" in details, f"a path the gateway refuses: INVALID_ARGUMENT ({code}, {details!r})")

# Rate limits: the unknown-cookie lookups on an auth: browser route are limited per client (burst 3 here).
codes = [call("/browser.Service/Call", [("cookie", "portcullis=" + secrets.token_urlsafe(32))])[0] for _ in range(8)]
check(grpc.StatusCode.RESOURCE_EXHAUSTED in codes, f"past a rate limit: RESOURCE_EXHAUSTED ({[c.name for c in codes]})")

# grpc: true refuses anything that is not gRPC, in HTTP's terms.
request = urllib.request.Request(f"http://{TARGET}/only.Service/Call", data=b"{}", headers={"Content-Type": "application/json", "Authorization": "Bearer " + TOKEN})
try:
    urllib.request.urlopen(request, timeout=10)
    check(False, "grpc: true refuses a JSON request")
except urllib.error.HTTPError as error:
    body = json.loads(error.read())
    check(error.code == 415 and body["error"] == "grpc_required", f"grpc: true: a JSON request is 415 grpc_required ({error.code}, {body})")
