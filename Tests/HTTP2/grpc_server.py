"""A gRPC server (Python's grpcio) for the HTTP/2 tests, behind the gateway on a `protocol: h2c`
route. Messages are raw bytes (no generated code); the service is `test.Echo`:

- Unary: answers a JSON of what it received (the message's length, the metadata names, whether the
  gateway's assertion came and the token did not), with trailing metadata `x-trailer: done`.
- ServerStream: the request is a count N; answers N messages `item-0` ... `item-(N-1)`.
- ClientStream: answers the total length of the messages it received, and their count.
- Bidi: answers each message with `echo:` before it, as it comes.
- Fail: ends with the status named in the request (`NOT_FOUND:message`) and trailing metadata.
- Slow: sleeps 5 s before answering (deadline tests).
- Large: answers a message of the length the request names.

Run: grpc_server.py PORT. Prints "listening" once it serves.
"""
import json
import sys
import time
from concurrent import futures

import grpc


def unary(request, context):
    metadata = dict(context.invocation_metadata())
    context.set_trailing_metadata([("x-trailer", "done")])
    return json.dumps({
        "length": len(request),
        "names": sorted(metadata),
        "assertion": "x-portcullis-assertion" in metadata,
        "authorization": "authorization" in metadata,
        "forwarded_for": metadata.get("x-forwarded-for"),
    }).encode()


def server_stream(request, context):
    for index in range(int(request)):
        yield f"item-{index}".encode()


def client_stream(requests, context):
    count, total = 0, 0
    for message in requests:
        count += 1
        total += len(message)
    return json.dumps({"count": count, "total": total}).encode()


def bidi(requests, context):
    for message in requests:
        yield b"echo:" + message


def fail(request, context):
    name, _, message = request.decode().partition(":")
    context.set_trailing_metadata([("x-reason", "asked")])
    context.abort(getattr(grpc.StatusCode, name), message)


def slow(request, context):
    time.sleep(5)
    return b"late"


def large(request, context):
    return b"L" * int(request)


handlers = {
    "Unary": grpc.unary_unary_rpc_method_handler(unary),
    "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
    "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
    "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
    "Fail": grpc.unary_unary_rpc_method_handler(fail),
    "Slow": grpc.unary_unary_rpc_method_handler(slow),
    "Large": grpc.unary_unary_rpc_method_handler(large),
}
server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[
    ("grpc.max_receive_message_length", 8 << 20), ("grpc.max_send_message_length", 8 << 20)])
server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Echo", handlers)])
server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
server.start()
print("listening", flush=True)
server.wait_for_termination()
