"""ext_authz's gRPC listener read frame by frame (started by scripts/ext-authz-tests.sh): the
calls Envoy makes, and the ones it never would, sent with the `h2` package over one connection,
each answer checked on its own stream. The CheckRequests are the xds-protos package's own Envoy
messages. Prints one line per check (never a token).
"""
import os
import socket
import struct
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import time
from envoy.service.auth.v3 import external_auth_pb2
from envoy_check import check_request
from grpc_health.v1 import health_pb2

GRPC_PORT = int(os.environ["EXT_AUTHZ_GRPC_PORT"])
TOKEN = open(os.environ["PORTCULLIS_TOKEN_FILE"]).read().strip()
CHECK = "/envoy.service.auth.v3.Authorization/Check"


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def framed(message, compressed=0):
    return struct.pack(">BI", compressed, len(message)) + message


class Connection:
    """One HTTP/2 connection to the listener; answers gathered per stream."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", GRPC_PORT), timeout=15)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.h2.initiate_connection()
        self.flush()
        self.answers = {}

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def open(self, path=CHECK, method="POST", content_type="application/grpc", end=False, extra=()):
        stream = self.h2.get_next_available_stream_id()
        headers = [(":method", method), (":scheme", "http"), (":path", path), (":authority", "ext-authz.test"),
                   ("content-type", content_type), ("te", "trailers"), *extra]
        self.h2.send_headers(stream, headers, end_stream=end)
        self.answers[stream] = {"headers": None, "data": b"", "trailers": None, "reset": None, "ended": False}
        self.flush()
        return stream

    def send(self, stream, data, end=False):
        # Within the peer's windows: what does not fit waits for its WINDOW_UPDATEs.
        while data:
            room = min(self.h2.local_flow_control_window(stream), self.h2.max_outbound_frame_size)
            if room == 0:
                if self.answers[stream]["reset"] is not None:
                    raise h2.exceptions.StreamClosedError(stream)
                self.read_once()
                continue
            chunk, data = data[:room], data[room:]
            self.h2.send_data(stream, chunk, end_stream=end and not data)
            self.flush()

    def read_once(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the listener closed the connection")
        for event in self.h2.receive_data(data):
            answer = self.answers.get(getattr(event, "stream_id", 0))
            if isinstance(event, h2.events.ResponseReceived):
                answer["headers"] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                answer["data"] += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.TrailersReceived):
                answer["trailers"] = dict(event.headers)
            elif isinstance(event, h2.events.StreamReset) and answer is not None:
                answer["reset"] = event.error_code
            elif isinstance(event, h2.events.StreamEnded):
                answer["ended"] = True
        self.flush()

    def wait(self, *streams):
        while not all(self.answers[s]["ended"] or self.answers[s]["reset"] is not None for s in streams):
            self.read_once()
        return [self.answers[s] for s in streams]

    def close(self):
        self.sock.close()


def status(answer):
    """The call's gRPC status: from the trailers, or the trailers-only answer's head."""
    fields = answer["trailers"] or answer["headers"] or {}
    return int(fields["grpc-status"]) if "grpc-status" in fields else None


def check_response(answer):
    data = answer["data"]
    flag, length = struct.unpack(">BI", data[:5])
    assert flag == 0 and len(data) == 5 + length, "one uncompressed message"
    return external_auth_pb2.CheckResponse.FromString(data[5:])


def check_bytes(path, headers=(), body=None):
    request = check_request("GET", path, list(headers))
    if body is not None:
        request.attributes.request.http.body = body
    return request.SerializeToString()


bearer = [("authorization", "Bearer " + TOKEN)]
conn = Connection()

# Calls interleaved on one connection: each answer is its own request's.
allowed = conn.open()
no_token = conn.open()
admin = conn.open()
conn.send(admin, framed(check_bytes("/api/admin/x", bearer)), end=True)
conn.send(no_token, framed(check_bytes("/api/plain/x")), end=True)
conn.send(allowed, framed(check_bytes("/api/plain/x", bearer)), end=True)
a, n, d = conn.wait(allowed, no_token, admin)
for answer in (a, n, d):
    check(answer["headers"][":status"] == "200" and answer["headers"]["content-type"] == "application/grpc" and status(answer) == 0,
          "each call is answered 200, application/grpc, a message and grpc-status 0 in trailers")
check(check_response(a).status.code == 0 and check_response(a).HasField("ok_response"), "three calls in flight at once: the one with a token is allowed")
check(check_response(n).denied_response.status.code == 401, "... the one without a token is denied 401 on its own stream")
check(check_response(d).denied_response.status.code == 403, "... the one the route's scopes refuse is denied 403 on its own stream")

# A message split into many frames, its prefix one byte a frame.
split = conn.open()
message = framed(check_bytes("/api/plain/x", bearer))
for i in range(8):
    conn.send(split, message[i:i + 1])
conn.send(split, message[8:], end=True)
(answer,) = conn.wait(split)
check(check_response(answer).HasField("ok_response"), "a message split over many DATA frames (its prefix one byte a frame) is read whole")

# A large check (a buffered body of 600 KiB): more than a stream's window, which is given back as it arrives.
large = conn.open()
conn.send(large, framed(check_bytes("/api/plain/x", bearer, body="b" * (600 * 1024))), end=True)
(answer,) = conn.wait(large)
check(check_response(answer).HasField("ok_response"), "a 600 KiB check, larger than a stream's window, is answered (its window given back as it arrives)")

# Over 1 MiB: RESOURCE_EXHAUSTED once its prefix says so, the rest not read (the stream reset
# NO_ERROR), the connection still serving.
huge = conn.open()
try:
    conn.send(huge, framed(b"\x0a" + b"x" * (1100 * 1024)), end=True)
except h2.exceptions.StreamClosedError:
    pass  # reset while it still sent
(answer,) = conn.wait(huge)
check(status(answer) == 8 and answer["reset"] == 0, f"a message over 1 MiB is RESOURCE_EXHAUSTED (status {status(answer)}) and its stream reset NO_ERROR ({answer['reset']})")
declared = conn.open()
conn.send(declared, struct.pack(">BI", 0, 2 << 20))
(answer,) = conn.wait(declared)
check(status(answer) == 8 and answer["reset"] == 0, "a prefix that declares 2 MiB is refused at once, before the message is sent")
health_large = conn.open(path="/grpc.health.v1.Health/Check")
conn.send(health_large, framed(health_pb2.HealthCheckRequest(service="s" * 2000).SerializeToString()), end=True)
(answer,) = conn.wait(health_large)
check(status(answer) == 8, "a health check over 1 KiB is RESOURCE_EXHAUSTED (health is asked by anyone; it holds little)")

# A message followed by trailers (HEADERS ending the request) is answered as one ending with its DATA.
trailed = conn.open()
conn.send(trailed, framed(check_bytes("/api/plain/x", bearer)))
conn.h2.send_headers(trailed, [("x-trailer", "1")], end_stream=True)
conn.flush()
(answer,) = conn.wait(trailed)
check(check_response(answer).HasField("ok_response"), "a request ended by trailers is answered")

for label, data, expected in [
    ("a compressed message (flag 1) is UNIMPLEMENTED: ext_authz reads identity only", framed(check_bytes("/api/plain/x", bearer), compressed=1), 12),
    ("two messages in one unary call are INTERNAL", framed(check_bytes("/api/plain/x", bearer)) * 2, 13),
    ("a call that ends inside its message is INTERNAL", framed(check_bytes("/api/plain/x", bearer))[:20], 13),
    ("bytes that are not a CheckRequest are INTERNAL", framed(b"\xff\xff\xff\xff"), 13),
    ("an unknown compression flag (7) is INTERNAL", framed(b"", compressed=7), 13),
]:
    stream = conn.open()
    conn.send(stream, data, end=True)
    (answer,) = conn.wait(stream)
    check(status(answer) == expected and answer["data"] == b"", f"{label} (status {status(answer)}, trailers only)")

stream = conn.open(end=True)
(answer,) = conn.wait(stream)
check(status(answer) == 13, "a call with no message is INTERNAL")

# Not a call this listener serves: refused at its HEADERS, whatever follows.
stream = conn.open(path="/envoy.service.auth.v2.Authorization/Check")
conn.send(stream, framed(check_bytes("/api/plain/x", bearer)), end=True)
(answer,) = conn.wait(stream)
check(status(answer) == 12 and "/envoy.service.auth.v2.Authorization/Check" in answer["headers"].get("grpc-message", ""),
      "another method is UNIMPLEMENTED, naming it")
# Refused at its HEADERS, a call that goes on sending more than a stream's window is drained: its
# window given back, so that its caller can finish sending and the stream close.
stream = conn.open(path="/envoy.service.auth.v2.Authorization/Check")
conn.send(stream, framed(check_bytes("/api/plain/x", bearer, body="d" * (300 * 1024))), end=True)
(answer,) = conn.wait(stream)
check(status(answer) == 12 and (stream not in conn.h2.streams or conn.h2.streams[stream].closed),
      "a refused call that goes on sending 300 KiB is drained to its end (never left waiting for a window)")
stream = conn.open(method="GET", end=True)
(answer,) = conn.wait(stream)
check(answer["headers"][":status"] == "405" and answer["headers"].get("allow") == "POST", "a GET is 405 with Allow: POST")
for content_type in ("application/json", "application/grpc-web", "application/grpc+json"):
    stream = conn.open(content_type=content_type)
    conn.send(stream, framed(check_bytes("/api/plain/x", bearer)), end=True)
    (answer,) = conn.wait(stream)
    check(answer["headers"][":status"] == "415", f"content-type {content_type} is 415")

# A call reset by its caller before its answer: nothing is written on it, and the next is served.
stream = conn.open()
conn.send(stream, framed(check_bytes("/api/plain/x", bearer)), end=True)
conn.h2.reset_stream(stream)
conn.flush()
after = conn.open()
conn.send(after, framed(check_bytes("/api/plain/x", bearer)), end=True)
(answer,) = conn.wait(after)
check(check_response(answer).HasField("ok_response"), "a call its caller reset is dropped; the next call on the connection is answered")

# Health on the same connection.
stream = conn.open(path="/grpc.health.v1.Health/Check")
conn.send(stream, framed(health_pb2.HealthCheckRequest(service="envoy.service.auth.v3.Authorization").SerializeToString()), end=True)
(answer,) = conn.wait(stream)
check(health_pb2.HealthCheckResponse.FromString(answer["data"][5:]).status == health_pb2.HealthCheckResponse.SERVING, "health: SERVING for the service")
stream = conn.open(path="/grpc.health.v1.Health/Check")
conn.send(stream, framed(health_pb2.HealthCheckRequest(service="nope%\n").SerializeToString()), end=True)
(answer,) = conn.wait(stream)
check(status(answer) == 5 and "%25%0A" in answer["headers"]["grpc-message"], "health: another service is NOT_FOUND, its name percent-encoded in grpc-message")

# A call whose message never finishes, and a refused one that never ends, do not hold their
# streams: DEADLINE_EXCEEDED and reset, and reset, 10 s after their HEADERS.
# A caller that keeps its window shut (SETTINGS_INITIAL_WINDOW_SIZE 0) holds its answer's DATA
# back: the stream is reset 10 s after its answer, not held open for good.
shut = Connection()
shut.h2.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
shut.flush()
shut_call = shut.open(path="/grpc.health.v1.Health/Check")
shut.send(shut_call, framed(health_pb2.HealthCheckRequest(service="").SerializeToString()), end=True)
slow = conn.open()
conn.send(slow, framed(check_bytes("/api/plain/x", bearer))[:3])
stalled = conn.open(path="/nope/Method")
conn.send(stalled, b"abc")
started = time.monotonic()
while conn.answers[slow]["reset"] is None or conn.answers[stalled]["reset"] is None:
    conn.read_once()
waited = time.monotonic() - started
check(status(conn.answers[slow]) == 4 and conn.answers[slow]["reset"] == 0 and 8 <= waited <= 14,
      f"a message that never finishes is DEADLINE_EXCEEDED and reset after 10 s ({waited:.1f} s)")
check(status(conn.answers[stalled]) == 12 and conn.answers[stalled]["reset"] == 0, "a refused call that never ends is reset after 10 s")
while shut.answers[shut_call]["reset"] is None and not shut.answers[shut_call]["ended"]:
    shut.read_once()
check(shut.answers[shut_call]["reset"] == 0 and shut.answers[shut_call]["data"] == b"" and shut.answers[shut_call]["headers"][":status"] == "200",
      "an answer held back by a window its caller keeps shut is reset within 10 s of the answer")
shut.close()
after = conn.open()
conn.send(after, framed(check_bytes("/api/plain/x", bearer)), end=True)
(answer,) = conn.wait(after)
check(check_response(answer).HasField("ok_response"), "... and the connection goes on serving")

check(all(TOKEN.encode() not in answer["data"] for answer in conn.answers.values()), "no answer carries the caller's token")

# A connection error (DATA on stream 0): GOAWAY with its code, then the connection closed, not
# left open to be read on.
raw = socket.create_connection(("127.0.0.1", GRPC_PORT), timeout=5)
raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" + b"\x00\x00\x01\x00\x00\x00\x00\x00\x00x")
seen = b""
try:
    while chunk := raw.recv(65536):
        seen += chunk
    closed = True
except (socket.timeout, TimeoutError):
    closed = False
except ConnectionResetError:
    closed = True
raw.close()
types, at = [], 0
while at + 9 <= len(seen):
    length = int.from_bytes(seen[at:at + 3], "big")
    types.append(seen[at + 3])
    at += 9 + length
check(7 in types and closed, f"a connection error is answered GOAWAY and the connection closed (frames {types}, closed {closed})")
conn.close()
