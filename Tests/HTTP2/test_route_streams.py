"""Route streams served on the HTTP/2 connection (no stream channel: `HTTP2RouteStreams`), against
the real `portcullis serve` started by scripts/http2-tests.sh, with Python's h2 as the client:
answers flow under the client's flow control, a reset stream ends alone, and every answer stays
on its own stream. Prints one line per check (never a token), exits 1 on the first failure.
"""
import os
import socket
import struct
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

PORT = int(os.environ["PORTCULLIS_PORT"])
TOKEN = open(os.environ["PORTCULLIS_TOKEN_FILE"]).read().strip()
BIG = 8388608  # /files/big.bin, through a route (auth: none) to a file server


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


class Client:
    """One h2 connection; `window` is the client's initial stream window (SETTINGS_INITIAL_WINDOW_SIZE)."""

    def __init__(self, window=65535):
        self.sock = socket.create_connection(("127.0.0.1", PORT))
        self.sock.settimeout(0.5)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.local_settings = h2.settings.Settings(client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.conn.initiate_connection()
        self.flush()
        self.streams = {}

    def flush(self):
        self.sock.sendall(self.conn.data_to_send())

    def get(self, stream, path, extra=()):
        self.conn.send_headers(stream, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", f"127.0.0.1:{PORT}")] + list(extra), end_stream=True)
        self.flush()
        self.streams[stream] = {"status": None, "body": bytearray(), "ended": False, "reset": None, "unacked": 0}

    def grpc(self, stream, method, message):
        headers = [(":method", "POST"), (":path", method), (":scheme", "http"), (":authority", f"127.0.0.1:{PORT}"),
                   ("content-type", "application/grpc"), ("te", "trailers"), ("authorization", "Bearer " + TOKEN)]
        self.conn.send_headers(stream, headers)
        self.conn.send_data(stream, b"\0" + struct.pack(">I", len(message)) + message, end_stream=True)
        self.flush()
        self.streams[stream] = {"status": None, "body": bytearray(), "ended": False, "reset": None, "unacked": 0, "trailers": None}

    def pump(self, seconds, ack=True, until=None):
        """Reads for up to `seconds`; acknowledges what it read (opening the window again) only when `ack`."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            if until and until():
                return
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            for event in self.conn.receive_data(data):
                state = self.streams.get(getattr(event, "stream_id", None))
                if isinstance(event, h2.events.ResponseReceived):
                    state["status"] = dict(event.headers).get(b":status")
                    state.setdefault("frames", []).append(("HEADERS", 0, event.stream_ended is not None))
                elif isinstance(event, h2.events.TrailersReceived):
                    state["trailers"] = dict(event.headers)
                elif isinstance(event, h2.events.DataReceived):
                    state["body"] += event.data
                    state.setdefault("frames", []).append(("DATA", len(event.data), event.stream_ended is not None))
                    if ack:
                        self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    else:
                        state["unacked"] += event.flow_controlled_length
                elif isinstance(event, h2.events.StreamEnded):
                    state["ended"] = True
                    state["ended_at"] = time.time()
                elif isinstance(event, h2.events.StreamReset):
                    state["reset"] = event.error_code
            self.flush()

    def open_window(self, stream):
        state = self.streams[stream]
        if state["unacked"]:
            self.conn.acknowledge_received_data(state["unacked"], stream)
            state["unacked"] = 0
            self.flush()

    def close(self):
        self.sock.close()


def slow_reader_gets_the_whole_answer():
    """A client whose window fills and stays shut for a while: the answer waits (the upstream read no
    further meanwhile), then flows again once the window opens, to its last byte."""
    client = Client()
    client.get(1, "/files/big.bin")
    client.pump(1.0, ack=False)
    held = len(client.streams[1]["body"])
    check(0 < held <= 65535 and not client.streams[1]["ended"],
          f"a route's answer stops at the client's shut window ({held} bytes of {BIG} sent, window 65535)")
    client.open_window(1)
    client.pump(30, until=lambda: client.streams[1]["ended"] or client.streams[1]["reset"] is not None)
    state = client.streams[1]
    check(state["ended"] and state["status"] == b"200" and len(state["body"]) == BIG and not any(state["body"]),
          f"once the window opens, the answer flows to its end ({len(state['body'])} of {BIG} bytes, status {state['status']})")
    client.close()


def slow_grpc_reader_gets_the_whole_answer():
    """The same over gRPC (an HTTP/2 upstream): the upstream's stream is paused while the client's window
    is shut, and read again once it opens (a paused HTTP/2 upstream stream must be asked to read)."""
    client = Client()
    client.grpc(1, "/test.Echo/Large", str(1 << 20).encode())
    client.pump(1.0, ack=False)
    held = len(client.streams[1]["body"])
    check(0 < held <= 65535 and not client.streams[1]["ended"], f"a gRPC answer stops at the client's shut window ({held} bytes)")
    client.open_window(1)
    client.pump(30, until=lambda: client.streams[1]["ended"] or client.streams[1]["reset"] is not None)
    state = client.streams[1]
    trailers = state.get("trailers") or {}
    check(state["ended"] and len(state["body"]) == (1 << 20) + 5 and trailers.get(b"grpc-status") == b"0",
          f"once the window opens, the 1 MiB message and grpc-status 0 arrive ({len(state['body'])} bytes, trailers {trailers.get(b'grpc-status')})")
    client.close()


def reset_stream_ends_alone():
    """A client resets a route stream mid-answer: that stream ends, and the connection's next stream is served."""
    client = Client()
    client.get(1, "/files/big.bin")
    client.pump(0.5, ack=False)
    # What stream 1 took of the connection's window is given back first (a client reading on), then it is reset.
    client.open_window(1)
    client.conn.reset_stream(1)
    client.flush()
    client.get(3, "/files/small.txt")
    client.pump(5, until=lambda: client.streams[3]["ended"])
    state = client.streams[3]
    check(state["ended"] and state["status"] == b"200" and bytes(state["body"]) == b"small\n",
          f"after stream 1 is reset mid-answer, stream 3 on the same connection is answered ({state['status']}, {bytes(state['body'])!r})")
    client.close()


def answers_stay_on_their_streams():
    """Route streams and stream-channel streams mixed on one connection (GETs, a HEAD, a refused
    path, a gRPC call, the API): each answer arrives on its own stream, framed for its own request."""
    client = Client(window=1 << 20)
    asks = {
        1: ("get", "/files/small.txt"),
        3: ("head", "/files/small.txt"),
        5: ("get", "/files/big.bin"),
        7: ("get", "/files/%00"),
        9: ("grpc", str(100).encode()),
        11: ("get", "/healthz"),
        13: ("get", "/files/small.txt"),
    }
    for stream, (kind, what) in asks.items():
        if kind == "grpc":
            client.grpc(stream, "/test.Echo/Large", what)
        elif kind == "head":
            client.conn.send_headers(stream, [(":method", "HEAD"), (":path", what), (":scheme", "http"), (":authority", f"127.0.0.1:{PORT}")], end_stream=True)
            client.flush()
            client.streams[stream] = {"status": None, "body": bytearray(), "ended": False, "reset": None, "unacked": 0}
        else:
            client.get(stream, what)
    client.pump(30, until=lambda: all(s["ended"] or s["reset"] is not None for s in client.streams.values()))
    got = {stream: (state["status"], len(state["body"])) for stream, state in client.streams.items()}
    check(got[1] == (b"200", 6) and got[13] == (b"200", 6), f"the two GETs of small.txt: 6 bytes each ({got[1]}, {got[13]})")
    check(got[3] == (b"200", 0), f"the HEAD: a head and no body ({got[3]})")
    check(got[5] == (b"200", BIG), f"the 8 MiB GET, whole on its stream ({got[5]})")
    check(got[7][0] == b"400", f"the refused path: 400 on its own stream ({got[7]})")
    check(got[9] == (b"200", 105) and (client.streams[9].get("trailers") or {}).get(b"grpc-status") == b"0", f"the gRPC call: its message and status ({got[9]})")
    check(got[11][0] == b"200", f"the API's /healthz ({got[11]})")
    client.close()


def answer_ends_with_its_last_frame():
    """A route stream's answer ends with its last frame's END_STREAM flag (HEADERS, then DATA that
    ends the stream, as nginx sends), never with an empty DATA frame of its own after the body."""
    client = Client()
    client.get(1, "/files/small.txt")
    client.pump(5, until=lambda: client.streams[1]["ended"])
    frames = client.streams[1].get("frames", [])
    check(frames == [("HEADERS", 0, False), ("DATA", 6, True)], f"a small answer: HEADERS, then its body in one DATA that ends the stream ({frames})")
    client.close()


def bodiless_answer_ends_with_its_head():
    """An answer without a body (the upstream's Content-Length: 0, head and end in one read) is one
    HEADERS frame that ends the stream, flushed at once: the frame closes the stream as it is written."""
    client = Client()
    client.pump(0.2)  # the SETTINGS exchange over first: no later client frame makes the gateway flush for it
    start = time.time()
    client.get(1, "/files/empty.txt")
    client.pump(3, until=lambda: client.streams[1]["ended"])
    state = client.streams[1]
    took = state.get("ended_at", start + 99) - start
    check(state["status"] == b"200" and state.get("frames") == [("HEADERS", 0, True)] and took < 2.5,
          f"an empty answer: one HEADERS that ends the stream, at once ({state['status']}, {state.get('frames')}, {took:.2f} s)")
    client.close()


def route_streams_time_out_each_at_its_own_deadline():
    """Route streams to an upstream that never answers, opened a second apart on one connection: each
    is answered 504 at its own deadline (runtime.timeout_seconds, 2 s), by the connection's one check
    re-armed for the next stream; a stream to a live upstream meanwhile is answered at once."""
    client = Client()
    start = time.time()
    client.get(1, "/hang/first")
    client.pump(1)
    client.get(3, "/hang/second")
    client.get(5, "/files/small.txt")
    client.pump(8, until=lambda: all(s["ended"] or s["reset"] is not None for s in client.streams.values()))
    first, second, live = client.streams[1], client.streams[3], client.streams[5]
    check(live["status"] == b"200" and live["ended_at"] - start < 1.9, f"the live upstream's stream is answered before the hung ones ({live['status']})")
    first_at, second_at = first.get("ended_at", 0) - start, second.get("ended_at", 0) - start
    check(first["status"] == b"504" and 1.8 < first_at < 3.5, f"the first hung stream: 504 at its deadline ({first['status']}, {first_at:.1f} s)")
    check(second["status"] == b"504" and second_at - first_at > 0.7 and second_at < 4.5,
          f"the second: 504 at its own deadline, a second later ({second['status']}, {second_at:.1f} s)")
    # A later stream whose own grpc-timeout is sooner than the check armed for the first: re-armed earlier.
    client.close()
    client = Client()
    start = time.time()
    client.get(1, "/hang/long")
    client.pump(0.3)
    sent_short = time.time()
    client.get(3, "/hang/short", extra=[("grpc-timeout", "500m")])
    client.pump(5, until=lambda: all(s["ended"] or s["reset"] is not None for s in client.streams.values()))
    long_at = client.streams[1].get("ended_at", 0) - start
    short_at = client.streams[3].get("ended_at", sent_short + 99) - sent_short
    check(client.streams[3]["status"] == b"504" and 0.4 < short_at < 1.2,
          f"a stream with a sooner grpc-timeout (0.5 s), opened after one due at 2 s: 504 at its own deadline ({client.streams[3]['status']}, {short_at:.1f} s)")
    check(client.streams[1]["status"] == b"504" and 1.8 < long_at < 3.5, f"and the first at its own ({client.streams[1]['status']}, {long_at:.1f} s)")
    client.close()


def http1_keep_alive_request_with_a_sooner_grpc_timeout():
    """The same deadline rule on an HTTP/1.1 connection (one check per connection, `SerialProxyExchangeHost`):
    after a request answered in time (the check stays armed for its 2 s deadline), the next request on
    the connection with a sooner grpc-timeout is answered 504 at its own deadline, not at the first's."""
    sock = socket.create_connection(("127.0.0.1", PORT))
    sock.settimeout(5)
    sock.sendall(f"GET /files/small.txt HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\n\r\n".encode())
    first = b""
    while not first.endswith(b"small\n"):
        first += sock.recv(65536)
    sent = time.time()
    sock.sendall(f"GET /hang/h1 HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\ngrpc-timeout: 500m\r\n\r\n".encode())
    second = sock.recv(65536)
    took = time.time() - sent
    sock.close()
    check(first.startswith(b"HTTP/1.1 200") and second.startswith(b"HTTP/1.1 504") and 0.4 < took < 1.2,
          f"HTTP/1.1: the second request's sooner grpc-timeout (0.5 s) is kept on a connection whose check was armed for 2 s ({second[:12]!r}, {took:.1f} s)")


def browser_navigation_answered_by_the_gateway():
    """A navigation to an `auth: browser` route with a session cookie the gateway does not know: the
    gateway's own answer (no body), written after the cookie's lookup (outside the read loop), closes
    the stream as its last frame goes out; the exchange finishes after that (it once found its stream
    freed: the process stopped). Then the connection's next stream is served."""
    client = Client()
    cookie = "portcullis=" + "A" * 43
    client.get(1, "/browser.Service/page", extra=[("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document"), ("accept", "text/html"), ("cookie", cookie)])
    client.pump(5, until=lambda: client.streams[1]["ended"] or client.streams[1]["reset"] is not None)
    first = client.streams[1]
    check(first["ended"] and first["status"] in (b"302", b"303", b"401"), f"a navigation with an unknown session cookie is answered by the gateway ({first['status']})")
    frames = first.get("frames", [])
    ends_in_last_frame = frames == [("HEADERS", 0, True)] or (len(frames) >= 2 and frames[-1][0] == "DATA" and frames[-1][1] > 0 and frames[-1][2])
    check(ends_in_last_frame, f"its answer ends with its last frame, no empty DATA after ({frames})")
    client.get(3, "/files/small.txt")
    client.pump(5, until=lambda: client.streams[3]["ended"])
    check(client.streams[3]["status"] == b"200", f"and the gateway serves on: the connection's next stream ({client.streams[3]['status']})")
    client.close()


slow_reader_gets_the_whole_answer()
slow_grpc_reader_gets_the_whole_answer()
reset_stream_ends_alone()
answers_stay_on_their_streams()
answer_ends_with_its_last_frame()
bodiless_answer_ends_with_its_head()
route_streams_time_out_each_at_its_own_deadline()
http1_keep_alive_request_with_a_sooner_grpc_timeout()
browser_navigation_answered_by_the_gateway()
