"""The HTTP/2 connection's idle time counts route streams (served without a stream channel) as
open from their first HEADERS to their close: against a `portcullis serve` started by
scripts/http2-tests.sh with `limits.idle_timeout_seconds: 1` and `runtime.timeout_seconds: 3`.
A connection whose streams are all done is sent GOAWAY (NO_ERROR) and closed once idle; one with a
stream still waiting for its upstream is not. Prints one line per check, exits 1 on the first failure.
"""
import os
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions

PORT = int(os.environ["PORTCULLIS_IDLE_PORT"])


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def watch(path, seconds):
    """Opens a connection, sends GET `path` (a route stream), and reads for up to `seconds`: when the
    answer ended, when a GOAWAY came (and its code), when the connection closed, from the start."""
    sock = socket.create_connection(("127.0.0.1", PORT))
    sock.settimeout(0.2)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", f"127.0.0.1:{PORT}")], end_stream=True)
    sock.sendall(conn.data_to_send())
    start = time.time()
    seen = {"status": None, "ended": None, "goaway": None, "code": None, "closed": None}
    raw = bytearray()  # the server's frames, scanned here for the GOAWAY (h2 refuses the PING after it)
    broken = False
    while time.time() - start < seconds and seen["closed"] is None:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            seen["closed"] = time.time() - start
            break
        raw += data
        while len(raw) >= 9 and len(raw) >= 9 + int.from_bytes(raw[0:3], "big"):
            length, kind = int.from_bytes(raw[0:3], "big"), raw[3]
            if kind == 7 and seen["goaway"] is None:
                seen["goaway"], seen["code"] = time.time() - start, int.from_bytes(raw[13:17], "big")
            if kind == 6 and not raw[4] & 1 and seen["goaway"] is not None:
                # The PING after a graceful GOAWAY, answered as any client does (h2 no longer can).
                try:
                    sock.sendall(bytes([0, 0, 8, 6, 1, 0, 0, 0, 0]) + bytes(raw[9:17]))
                except OSError:
                    pass
            del raw[:9 + length]
        if broken:
            continue
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            broken = True
            continue
        for event in events:
            if isinstance(event, h2.events.ResponseReceived):
                seen["status"] = dict(event.headers).get(b":status")
            elif isinstance(event, h2.events.StreamEnded):
                seen["ended"] = time.time() - start
        pending = conn.data_to_send()
        if pending:
            try:
                sock.sendall(pending)
            except OSError:
                pass
    sock.close()
    return seen


answered = watch("/files/small.txt", 6)
check(answered["status"] == b"200" and answered["ended"] is not None and answered["ended"] < 1,
      f"a route stream is answered ({answered['status']})")
check(answered["goaway"] is not None and answered["code"] == 0 and 0.8 < answered["goaway"] - answered["ended"] < 3,
      f"then, its stream closed and the connection idle for 1 s, GOAWAY NO_ERROR ({answered['code']}, after {answered['goaway'] and answered['goaway'] - answered['ended']:.1f} s)")
check(answered["closed"] is not None, "and the connection is closed")

waiting = watch("/hang/idle", 8)
check(waiting["status"] == b"504" and waiting["ended"] is not None and 2.5 < waiting["ended"] < 4.5,
      f"a route stream waiting 3 s for its upstream keeps its connection past the 1 s idle time, and is answered 504 ({waiting['status']}, {waiting['ended'] or 0:.1f} s)")
check(waiting["goaway"] is not None and waiting["goaway"] > waiting["ended"] and waiting["code"] == 0,
      f"the GOAWAY comes only after it ended ({waiting['goaway'] or 0:.1f} s)")


def silent(seconds, first=b""):
    """Opens a connection that sends the preface, an empty SETTINGS and `first`, then nothing (ACKing
    the server's SETTINGS, as a client must): when the server closed it, from the start, or None."""
    sock = socket.create_connection(("127.0.0.1", PORT))
    sock.settimeout(0.2)
    sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]) + first)
    start, raw, acked = time.time(), b"", False
    while time.time() - start < seconds:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            data = b""
        if not data:
            sock.close()
            return time.time() - start
        raw += data
        if not acked and len(raw) >= 9 and raw[3] == 4:
            sock.sendall(bytes([0, 0, 0, 4, 1, 0, 0, 0, 0]))
            acked = True
    sock.close()
    return None


closed = silent(6)
check(closed is not None and closed < 3.5, f"a connection that sends the preface and then nothing is closed once idle for 1 s (after {closed or 0:.1f} s; never closed before)")
# A request swift-nio-http2's HTTP/1 codec cannot convert (no :authority): answered, and the connection then idles.
import hpack  # noqa: E402 (h2's encoder)
block = hpack.Encoder().encode([(":method", "GET"), (":scheme", "http"), (":path", "/files/small.txt")])
closed = silent(6, len(block).to_bytes(3, "big") + bytes([1, 5, 0, 0, 0, 1]) + block)
check(closed is not None and closed < 3.5, f"a connection whose one request had no :authority is answered and closed once idle (after {closed or 0:.1f} s)")

# An upload refused at its head (401, no token) whose client never ends it and keeps its window shut
# (the answer's body never goes): closed at the request timeout (2 s here), its rest drained for the
# answer's grace (5 s), then the answer's own grace (5 s), and reset NO_ERROR: bounded, never held.
import h2raw  # noqa: E402 (frames byte for byte)
client = h2raw.Raw(PORT, initial_settings=((0x4, 0),))
client.frames(0.3)
client.request(1, "/private/upload", method="POST", end_stream=False)
started = time.time()
frames = client.frames(20, until=lambda f: f[0] == h2raw.RST_STREAM and f[2] == 1)
held = time.time() - started
client.close()
check(h2raw.statuses(frames).get(1) == "401" and h2raw.resets(frames).get(1) == h2raw.NO_ERROR and held < 16,
      f"an upload refused at its head, its client's window shut and its body never ended, is reset NO_ERROR within its bounds ({h2raw.statuses(frames).get(1)}, {h2raw.resets(frames)}, {held:.1f} s)")
