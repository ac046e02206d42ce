"""A raw HTTP/2 client for the attack tests: frames written byte for byte (RFC 9113 §4.1), header
blocks encoded with hpack (h2's encoder), so a test can send what no polite client would."""
import socket
import struct
import time

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
NO_ERROR, PROTOCOL_ERROR, CANCEL, REFUSED_STREAM, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x8, 0x7, 0xB


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def settings(*pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", key, value) for key, value in pairs))


class Raw:
    """One connection. `frames()` reads what came (ACKing the server's SETTINGS, as a client must)."""

    def __init__(self, port, initial_settings=()):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(5)
        self.encoder = hpack.Encoder()
        self.buffer = b""
        self.closed = False
        self.send(PREFACE + settings(*initial_settings))

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def block(self, path, method="GET", extra=()):
        return self.encoder.encode([(":method", method), (":scheme", "http"), (":path", path), (":authority", "127.0.0.1")] + list(extra))

    def request(self, stream, path, method="GET", extra=(), end_stream=True):
        flags = END_HEADERS | (END_STREAM if end_stream else 0)
        return self.send(frame(HEADERS, flags, stream, self.block(path, method, extra)))

    def frames(self, seconds=2.0, until=None):
        """Frames read within `seconds` (or until `until(frame)` is true); sets `closed` at EOF."""
        out = []
        deadline = time.time() + seconds
        while time.time() < deadline and not self.closed:
            while len(self.buffer) >= 9:
                length = int.from_bytes(self.buffer[:3], "big")
                if len(self.buffer) < 9 + length:
                    break
                kind, flags = self.buffer[3], self.buffer[4]
                stream = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
                payload = self.buffer[9:9 + length]
                self.buffer = self.buffer[9 + length:]
                if kind == SETTINGS and not flags & ACK:
                    self.send(frame(SETTINGS, ACK, 0))
                out.append((kind, flags, stream, payload))
                if until and until(out[-1]):
                    return out
            self.sock.settimeout(max(0.01, deadline - time.time()))
            try:
                data = self.sock.recv(1 << 16)
            except socket.timeout:
                break
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            self.buffer += data
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def goaway_code(frames):
    for kind, _, _, payload in frames:
        if kind == GOAWAY:
            return int.from_bytes(payload[4:8], "big")
    return None


def resets(frames):
    return {stream: int.from_bytes(payload[:4], "big") for kind, _, stream, payload in frames if kind == RST_STREAM}


def statuses(frames, decoder=None):
    """The :status of each stream's first HEADERS."""
    decoder = decoder or hpack.Decoder()
    found = {}
    for kind, _, stream, payload in frames:
        if kind == HEADERS:
            headers = dict(decoder.decode(payload))
            if ":status" in headers and stream not in found:
                found[stream] = headers[":status"]
    return found
