"""The HTTP/2 attacks, each against the real `portcullis serve` (started by scripts/http2-tests.sh):
the gateway stays up, its memory stays bounded, and another client is served meanwhile.

Each attack runs on a connection of its own (h2raw: frames byte for byte) while a second client,
speaking HTTP/1.1 and HTTP/2, is asked for an answer during and after it. Prints one line per
check (never a token), exits 1 on the first failure.
"""
import json
import os
import socket
import struct
import sys
import threading
import time
import urllib.request

import h2raw
import hpack
from h2raw import CONTINUATION, END_HEADERS, END_STREAM, HEADERS, PING, RST_STREAM, SETTINGS, WINDOW_UPDATE, frame

PORT = int(os.environ["PORTCULLIS_PORT"])
PID = int(os.environ["PORTCULLIS_PID"])
ADMIN_PORT = int(os.environ["PORTCULLIS_ADMIN_PORT"])
BIG = "/files/big.bin"  # 8 MiB through a route (auth: none) to a file server
MEMORY_BOUND_MB = int(os.environ.get("PORTCULLIS_MEMORY_BOUND_MB", "32"))


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def rss_mb():
    with open(f"/proc/{PID}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def upstream_requests(path):
    """Requests for `path` the route's upstream (python's http.server) logged so far."""
    with open(os.environ["PORTCULLIS_FILES_LOG"]) as log:
        return sum(1 for line in log if f"GET {path} " in line)


def alive():
    try:
        os.kill(PID, 0)
        return True
    except OSError:
        return False


def http1_served():
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def http2_served():
    client = h2raw.Raw(PORT)
    client.request(1, "/healthz")
    frames = client.frames(5, until=lambda f: f[0] in (0, 1) and f[1] & END_STREAM and f[2] == 1)
    client.close()
    return h2raw.statuses(frames).get(1) == "200"


class Bystander:
    """Another client asking every 100 ms, over HTTP/1.1 and HTTP/2, while an attack runs."""

    def __init__(self):
        self.answers, self.failures = 0, 0
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while self.running:
            for ask in (http1_served, http2_served):
                if ask():
                    self.answers += 1
                else:
                    self.failures += 1
            time.sleep(0.1)

    def stop(self):
        self.running = False
        self.thread.join(10)
        return self.answers, self.failures


def after(name, baseline, bystander):
    answers, failures = bystander.stop()
    check(alive(), f"{name}: the gateway is still running")
    check(answers > 0 and failures == 0, f"{name}: another client was served meanwhile ({answers} answers over HTTP/1.1 and HTTP/2, {failures} failed)")
    check(http1_served() and http2_served(), f"{name}: and is served after it")
    grown = rss_mb() - baseline
    check(grown < MEMORY_BOUND_MB, f"{name}: resident memory grew {grown:.1f} MB (bound {MEMORY_BOUND_MB} MB)")


def rapid_reset():
    """CVE-2023-44487: streams opened and reset at once, thousands of them."""
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    sent = 0
    for index in range(5000):
        stream = 1 + 2 * index
        if not client.send(frame(HEADERS, END_HEADERS | END_STREAM, stream, client.block("/files/small.txt")) + frame(RST_STREAM, 0, stream, struct.pack(">I", h2raw.CANCEL))):
            break
        sent += 1
    frames = client.frames(3)
    client.close()
    check(h2raw.goaway_code(frames) == h2raw.ENHANCE_YOUR_CALM or client.closed, f"rapid reset: the connection is closed (GOAWAY {h2raw.goaway_code(frames)}) after {sent} of 5000 streams opened and reset")
    time.sleep(1)
    reached = upstream_requests("/small.txt")
    check(reached < 500, f"rapid reset: {reached} of the 5000 streams reached the upstream")
    after("rapid reset", baseline, bystander)


def continuation_flood():
    """CVE-2024-27316 and its family: one header block that never ends, in endless CONTINUATION frames."""
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.send(frame(HEADERS, 0, 1, client.block("/healthz")))
    sent = 0
    chunk = frame(CONTINUATION, 0, 1, client.encoder.encode([("x-flood", "a" * 8000)]))
    for _ in range(20000):
        if not client.send(chunk):
            break
        sent += 1
    frames = client.frames(3)
    client.close()
    check(client.closed or h2raw.goaway_code(frames) is not None, f"CONTINUATION flood: the connection is closed after {sent} frames of 8 KB (GOAWAY {h2raw.goaway_code(frames)})")
    after("CONTINUATION flood", baseline, bystander)


def hpack_bomb():
    """A small header block that decodes to megabytes: one large field put in the dynamic table, then referenced again and again."""
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    # Literal with incremental indexing (0x40, new name), a 4000-byte value: entry 62 of the table.
    name, value = b"x-bomb", b"b" * 4000
    literal = bytes([0x40, len(name)]) + name + bytes([0x7F]) + encode_int(len(value) - 127) + value
    references = bytes([0xBE]) * 4000  # indexed field 62, four thousand times: 16 MB decoded from 4 KB
    block = client.block("/healthz") + literal + references
    client.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, block))
    frames = client.frames(3)
    client.close()
    refused = h2raw.goaway_code(frames) is not None or 1 in h2raw.resets(frames) or client.closed
    check(refused and h2raw.statuses(frames).get(1) is None, f"HPACK bomb: refused (GOAWAY {h2raw.goaway_code(frames)}, resets {h2raw.resets(frames)}), never served")
    after("HPACK bomb", baseline, bystander)


def encode_int(value):
    """HPACK's integer continuation bytes (RFC 7541 §5.1) after a full prefix."""
    out = b""
    while value >= 128:
        out += bytes([value % 128 + 128])
        value //= 128
    return out + bytes([value])


def control_flood(kind, name):
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    payload = frame(SETTINGS, 0, 0, struct.pack(">HI", 0x3, 100)) if kind == SETTINGS else frame(PING, 0, 0, b"12345678")
    sent = 0
    for _ in range(20000):
        if not client.send(payload * 10):
            break
        sent += 10
    frames = client.frames(3)
    client.close()
    check(client.closed or h2raw.goaway_code(frames) is not None, f"{name} flood: the connection is closed after {sent} frames (GOAWAY {h2raw.goaway_code(frames)})")
    after(f"{name} flood", baseline, bystander)


def too_many_streams():
    """More streams open at once than SETTINGS_MAX_CONCURRENT_STREAMS (100): the rest refused, the first served."""
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    first = client.frames(0.5)
    advertised = None
    for kind, flags, _, payload in first:
        if kind == SETTINGS and not flags & 1:
            for offset in range(0, len(payload), 6):
                key, value = struct.unpack(">HI", payload[offset:offset + 6])
                if key == 0x3:
                    advertised = value
    check(advertised == 100, f"too many streams: the gateway advertises SETTINGS_MAX_CONCURRENT_STREAMS {advertised}")
    # Streams left open (an upstream that never answers, a body that never comes), then one more.
    for index in range(100):
        client.request(1 + 2 * index, "/hang/x", method="POST", extra=[("content-length", "10")], end_stream=False)
    frames = client.frames(1)
    check(not client.closed and h2raw.goaway_code(frames) is None and not h2raw.resets(frames), "too many streams: 100 streams open at once are taken")
    client.request(201, "/hang/x", method="POST", extra=[("content-length", "10")], end_stream=False)
    frames = client.frames(2)
    # swift-nio-http2 treats the 101st as a connection error (RFC 9113 §5.1.2 allows a stream error too).
    check(h2raw.goaway_code(frames) == h2raw.PROTOCOL_ERROR, f"too many streams: the 101st closes the connection with GOAWAY PROTOCOL_ERROR ({h2raw.goaway_code(frames)})")
    client.close()
    after("too many streams", baseline, bystander)


def slow_read():
    """Clients that never open their window (SETTINGS_INITIAL_WINDOW_SIZE 0) and ask for 8 MiB each, twenty streams at once."""
    baseline, bystander = rss_mb(), Bystander()
    clients = []
    for _ in range(5):
        client = h2raw.Raw(PORT, initial_settings=[(0x4, 0)])
        client.frames(0.2)
        for index in range(20):
            client.request(1 + 2 * index, BIG)
        clients.append(client)
    for client in clients:
        client.frames(2)
    grown = rss_mb() - baseline
    check(grown < MEMORY_BOUND_MB, f"slow read: 100 streams of 8 MiB not read hold {grown:.1f} MB in the gateway (bound {MEMORY_BOUND_MB} MB)")
    for client in clients:
        client.close()
    after("slow read", baseline, bystander)


def header_list_past_limit():
    """A request whose headers are larger than limits.max_header_bytes (16 KiB)."""
    baseline, bystander = rss_mb(), Bystander()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    block = client.block("/healthz", extra=[(f"x-big-{index}", "v" * 4000) for index in range(8)])
    # Sent as HEADERS and CONTINUATION frames of 16 KiB (the default largest frame).
    pieces = [block[i:i + 16384] for i in range(0, len(block), 16384)]
    data = frame(HEADERS, END_STREAM | (END_HEADERS if len(pieces) == 1 else 0), 1, pieces[0])
    for index, piece in enumerate(pieces[1:], 1):
        data += frame(CONTINUATION, END_HEADERS if index == len(pieces) - 1 else 0, 1, piece)
    client.send(data)
    frames = client.frames(3)
    client.close()
    served = h2raw.statuses(frames).get(1)
    check(served in (None, "431"), f"a header list past the limit is refused ({served}, GOAWAY {h2raw.goaway_code(frames)}, resets {h2raw.resets(frames)})")
    after("header list past the limit", baseline, bystander)


def smuggling():
    """A GET without content-length carrying DATA (swift-nio-http2 frames it as bodiless): its bytes must
    never reach an HTTP/1.1 upstream, where they would be read as a request of their own."""
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.request(1, "/files/small.txt", end_stream=False)
    client.send(frame(h2raw.DATA, END_STREAM, 1, b"GET /smuggled.txt HTTP/1.1\r\nHost: upstream\r\n\r\n"))
    frames = client.frames(2, until=lambda f: f[2] == 1 and f[1] & END_STREAM)
    client.close()
    time.sleep(0.5)
    check(h2raw.statuses(frames).get(1) in ("400", "200") and upstream_requests("/smuggled.txt") == 0,
          f"a GET's unframed DATA never reaches the upstream as a request ({h2raw.statuses(frames).get(1)}, smuggled requests seen: {upstream_requests('/smuggled.txt')})")
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.request(1, "/files/small.txt", extra=[("host", "other.example")])
    frames = client.frames(2, until=lambda f: f[2] == 1 and f[1] & END_STREAM)
    client.close()
    check(h2raw.statuses(frames).get(1) == "400", f"a host field naming another authority than :authority is 400 ({h2raw.statuses(frames).get(1)})")
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.request(1, "/files/small.txt", method="POST", extra=[("content-length", "+5")], end_stream=False)
    client.send(frame(h2raw.DATA, END_STREAM, 1, b"hello"))
    frames = client.frames(2, until=lambda f: f[2] == 1 and f[1] & END_STREAM)
    client.close()
    check(h2raw.statuses(frames).get(1) == "400" or 1 in h2raw.resets(frames), f"content-length +5 is refused, never forwarded as it came ({h2raw.statuses(frames).get(1)}, resets {h2raw.resets(frames)})")


def malformed_header_blocks():
    """Streams whose first HEADERS is refused as it arrives (an empty block, no pseudo-headers): each
    is reset, and the stream bookkeeping holds (the fuzzer's input that stopped a debug build: a
    stream closed that was never reported open), mixed with a route stream, DATA after END_STREAM and
    a stream id going backwards on one connection."""
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.send(frame(HEADERS, END_HEADERS, 1, b""))
    frames = client.frames(2, until=lambda f: f[0] == RST_STREAM and f[2] == 1)
    check(1 in h2raw.resets(frames) and not client.closed, f"an empty header block: its stream is reset ({h2raw.resets(frames)}), the connection kept")
    client.request(3, "/files/small.txt")
    frames = client.frames(3, until=lambda f: f[2] == 3 and f[1] & END_STREAM)
    check(h2raw.statuses(frames).get(3) == "200", f"the connection's next stream is served ({h2raw.statuses(frames).get(3)})")
    client.close()
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    client.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, client.block("/files/small.txt", method="POST"))
                + frame(HEADERS, END_HEADERS, 13, b"") + frame(h2raw.DATA, 0, 1, b"x") + frame(HEADERS, 0, 3, client.block("/files/small.txt")))
    client.frames(2)
    client.close()
    time.sleep(0.5)
    check(alive() and http1_served() and http2_served(), "the fuzzer's sequence (a POST, an empty block, DATA after the end, a lower stream id): the gateway serves on")


def answer_of(frames, stream, decoder):
    """The status and the JSON body of `stream`'s answer, and whether it ended (`decoder`: the
    connection's HPACK decoder; each batch of frames is passed once, in order)."""
    body = b"".join(payload for kind, _, id, payload in frames if kind == h2raw.DATA and id == stream)
    ended = any(id == stream and flags & END_STREAM and kind in (HEADERS, h2raw.DATA) for kind, flags, id, _ in frames)
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    return h2raw.statuses(frames, decoder).get(stream), parsed, ended


def heads_the_codec_cannot_convert():
    """Requests swift-nio-http2's HTTP/1 codec cannot convert (no :authority, CONNECT) were neither
    answered nor reset, and held their connection; an absolute :path picked the route by its host over
    :authority; the 400 for a host field disagreeing with :authority lost its JSON body. Each is now a
    400 invalid_request with its body, the stream ended, the connection serving on."""
    shapes = [
        ("a request without :authority", [(":method", "GET"), (":scheme", "http"), (":path", "/files/small.txt")]),
        ("CONNECT", [(":method", "CONNECT"), (":authority", "127.0.0.1:1")]),
        ("an absolute :path", [(":method", "GET"), (":scheme", "http"), (":path", f"http://127.0.0.1:{PORT}/files/small.txt"), (":authority", "127.0.0.1")]),
        ("an absolute :path naming another host", [(":method", "GET"), (":scheme", "http"), (":path", "http://other.example/files/small.txt"), (":authority", "127.0.0.1")]),
        ("a host field naming another authority", [(":method", "GET"), (":scheme", "http"), (":path", "/files/small.txt"), (":authority", "127.0.0.1"), ("host", "other.example")]),
    ]
    client = h2raw.Raw(PORT)
    client.frames(0.3)
    decoder = hpack.Decoder()
    for index, (name, block) in enumerate(shapes):
        stream = 1 + 2 * index
        client.send(frame(HEADERS, END_HEADERS | END_STREAM, stream, client.encoder.encode(block)))
        frames = client.frames(3, until=lambda f: f[2] == stream and (f[1] & END_STREAM and f[0] in (HEADERS, h2raw.DATA) or f[0] == RST_STREAM))
        status, body, ended = answer_of(frames, stream, decoder)
        check(status == "400" and ended and (body or {}).get("error") == "invalid_request" and not client.closed,
              f"{name}: 400 invalid_request with its JSON body, the stream ended, the connection kept ({status}, {body}, ended {ended})")
    stream = 1 + 2 * len(shapes)
    client.request(stream, "/files/small.txt")
    frames = client.frames(3, until=lambda f: f[2] == stream and f[1] & END_STREAM)
    served = h2raw.statuses(frames, decoder).get(stream)
    check(served == "200", f"the connection's next stream is served ({served})")
    client.close()
    # Thousands of them on a few connections: each answered, memory bounded.
    baseline, bystander = rss_mb(), Bystander()
    answered = 0
    for _ in range(4):
        client = h2raw.Raw(PORT)
        client.frames(0.3)
        for batch in range(10):
            data = b"".join(frame(HEADERS, END_HEADERS | END_STREAM, 1 + 2 * (batch * 50 + index), client.encoder.encode(shapes[index % 2][1]))
                            for index in range(50))
            client.send(data)
            ended = []
            client.frames(5, until=lambda f: f[0] == h2raw.DATA and f[1] & END_STREAM and not ended.append(f) and len(ended) == 50)
            answered += len(ended)
        client.close()
    check(answered == 2000, f"2000 such streams on 4 connections are each answered ({answered})")
    # A client that keeps its window shut cannot hold such a stream: its 400's body never goes, and
    # the stream is reset (NO_ERROR) once the answer's grace (5 s) is over.
    client = h2raw.Raw(PORT, initial_settings=((0x4, 0),))
    client.frames(0.3)
    client.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, client.encoder.encode(shapes[0][1])))
    started = time.time()
    frames = client.frames(9, until=lambda f: f[0] == RST_STREAM and f[2] == 1)
    held = time.time() - started
    client.close()
    check(h2raw.statuses(frames).get(1) == "400" and h2raw.resets(frames).get(1) == h2raw.NO_ERROR and held < 8,
          f"a refused stream whose client keeps its window shut is reset NO_ERROR after the answer's grace ({h2raw.resets(frames)}, {held:.1f} s)")

    after("unconvertible heads", baseline, bystander)


def invented_methods():
    """HTTP/2 lets a method be any token: 600 streams, each with a method of its own, to the gateway's
    own endpoints and to a route. Each is answered, and none becomes a metric label of its own (a
    series is kept for the process's life): they count as OTHER."""
    baseline, bystander = rss_mb(), Bystander()
    answered = 0
    for connection in range(3):
        client = h2raw.Raw(PORT)
        client.frames(0.3)
        decoder = hpack.Decoder()
        for index in range(200):
            stream = 1 + 2 * index
            path = "/.well-known/jwks.json" if index % 2 else "/files/small.txt"
            client.send(frame(HEADERS, END_HEADERS | END_STREAM, stream, client.encoder.encode(
                [(":method", f"INVENTED{connection}X{index}"), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1")])))
            if index % 50 == 49:
                frames = client.frames(5, until=lambda f, s=stream: f[2] == s and f[1] & END_STREAM)
                answered += sum(1 for status in h2raw.statuses(frames, decoder).values() if status)
        frames = client.frames(2)
        answered += sum(1 for status in h2raw.statuses(frames, decoder).values() if status)
        client.close()
    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    check(answered == 600 and "INVENTED" not in metrics and 'method="OTHER"' in metrics,
          f"600 invented methods are answered ({answered} statuses) and counted as OTHER, never as labels of their own")
    after("invented methods", baseline, bystander)


check(http1_served() and http2_served(), "the gateway serves HTTP/1.1 and HTTP/2 before the attacks")
invented_methods()
heads_the_codec_cannot_convert()
malformed_header_blocks()
smuggling()
rapid_reset()
continuation_flood()
hpack_bomb()
control_flood(SETTINGS, "SETTINGS")
control_flood(PING, "PING")
too_many_streams()
slow_read()
header_list_past_limit()
