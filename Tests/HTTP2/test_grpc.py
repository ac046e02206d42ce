"""gRPC through the gateway, read by Python's grpcio client (h2c with prior knowledge, what
`grpc.insecure_channel` speaks), against the real `portcullis serve` started by
scripts/http2-tests.sh. Each refusal is read by the client as its gRPC status code, with the
gateway's stable error code in the status's details. Prints one line per check (never a token).
"""
import json
import os
import queue
import secrets
import sys
import time
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
code, details = call("/hung.Service/Call", bearer, request=b"x" * 3_000_000)
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

# Calls that reach a gRPC server behind the gateway (protocol: h2c), with the token in the metadata.
OPTIONS = [("grpc.max_receive_message_length", 8 << 20), ("grpc.max_send_message_length", 8 << 20)]
with grpc.insecure_channel(TARGET, options=OPTIONS) as channel:
    unary = channel.unary_unary("/test.Echo/Unary")
    answer, call = unary.with_call(b"hello", metadata=bearer + [("x-custom", "kept")], timeout=15)
    seen = json.loads(answer)
    check(seen["length"] == 5 and seen["assertion"] and not seen["authorization"] and "x-custom" in seen["names"],
          f"unary: the server got the message, the metadata, the gateway's assertion and never the token ({seen})")
    check(("x-trailer", "done") in list(call.trailing_metadata()), f"unary: the server's trailing metadata is relayed ({call.trailing_metadata()})")
    check(call.code() == grpc.StatusCode.OK, "unary: status OK, read from the relayed trailers")

    items = [item.decode() for item in channel.unary_stream("/test.Echo/ServerStream")(b"50", metadata=bearer, timeout=15)]
    check(items == [f"item-{index}" for index in range(50)], f"server streaming: fifty messages in order ({len(items)})")

    def messages():
        for index in range(100):
            yield b"m" * 1000
    total = json.loads(channel.stream_unary("/test.Echo/ClientStream")(messages(), metadata=bearer, timeout=15))
    check(total == {"count": 100, "total": 100_000}, f"client streaming: a hundred messages arrive whole ({total})")

    # Each message is sent only once the answer to the one before came back through the gateway:
    # both directions stream, neither waits for the other's end.
    outgoing = queue.Queue()
    outgoing.put(b"m0")

    def conversation():
        while (message := outgoing.get()) is not None:
            yield message
    answers = []
    for reply in channel.stream_stream("/test.Echo/Bidi")(conversation(), metadata=bearer, timeout=15):
        answers.append(reply.decode())
        outgoing.put(f"m{len(answers)}".encode() if len(answers) < 5 else None)
    check(answers == [f"echo:m{index}" for index in range(5)], f"bidirectional streaming: each message answered before the next is sent ({answers})")

    try:
        channel.unary_unary("/test.Echo/Fail").with_call(b"NOT_FOUND:no such thing", metadata=bearer, timeout=15)
        check(False, "a server's own status is relayed")
    except grpc.RpcError as error:
        check(error.code() == grpc.StatusCode.NOT_FOUND and error.details() == "no such thing" and ("x-reason", "asked") in list(error.trailing_metadata()),
              f"a server's own status, message and trailing metadata are relayed ({error.code()}, {error.details()!r})")

    try:
        channel.unary_unary("/test.Echo/Slow")(b"", metadata=bearer, timeout=1)
        check(False, "a deadline is honoured")
    except grpc.RpcError as error:
        check(error.code() == grpc.StatusCode.DEADLINE_EXCEEDED, f"a call past its deadline (grpc-timeout 1 s, the server takes 5): DEADLINE_EXCEEDED ({error.code()})")

    large = channel.unary_unary("/test.Echo/Large")(str(3 << 20).encode(), metadata=bearer, timeout=15)
    check(len(large) == 3 << 20, f"a 3 MiB answer arrives whole ({len(large)})")
    echoed = json.loads(unary(b"x" * (1 << 20), metadata=bearer, timeout=15))
    check(echoed["length"] == 1 << 20, f"a 1 MiB request arrives whole ({echoed['length']})")

    try:
        unary(b"hello", timeout=15)
        check(False, "no token on a gRPC route")
    except grpc.RpcError as error:
        check(error.code() == grpc.StatusCode.UNAUTHENTICATED, f"the same route without a token: UNAUTHENTICATED ({error.code()})")

# The trailers-only form on the wire: a refused call is one HEADERS frame that ends the stream.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h2raw  # noqa: E402

raw = h2raw.Raw(PORT)
raw.request(1, "/down.Service/Call", method="POST", extra=[("content-type", "application/grpc"), ("te", "trailers")])
frames = [f for f in raw.frames(3, until=lambda f: f[2] == 1 and f[1] & h2raw.END_STREAM) if f[2] == 1]
raw.close()
check([(kind, bool(flags & h2raw.END_STREAM)) for kind, flags, _, _ in frames] == [(h2raw.HEADERS, True)],
      f"a refused call is answered trailers-only: one HEADERS frame ending the stream ({[(k, f) for k, f, _, _ in frames]})")

# grpc-timeout bounds the gateway's wait for the upstream, whatever the client does with its own deadline.
raw = h2raw.Raw(PORT)
started = time.time()
raw.request(1, "/test.Echo/Slow", method="POST", extra=[("content-type", "application/grpc"), ("te", "trailers"), ("grpc-timeout", "500m"),
                                                         ("authorization", "Bearer " + TOKEN)], end_stream=False)
raw.send(h2raw.frame(h2raw.DATA, h2raw.END_STREAM, 1, b"\x00\x00\x00\x00\x00"))
decoder = __import__("hpack").Decoder()
frames = raw.frames(4, until=lambda f: f[2] == 1 and f[1] & h2raw.END_STREAM)
raw.close()
fields = {}
for kind, _, stream, payload in frames:
    if kind == h2raw.HEADERS and stream == 1:
        fields.update(dict(decoder.decode(payload)))
elapsed = time.time() - started
check(fields.get("grpc-status") == "4" and elapsed < 1.5, f"grpc-timeout 500m: the gateway answers DEADLINE_EXCEEDED after {elapsed:.2f} s, not its own 2 s ({fields.get('grpc-status')}, {fields.get('grpc-message')})")
