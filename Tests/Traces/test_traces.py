"""OpenTelemetry traces from the real `portcullis serve` (started by scripts/traces-tests.sh with
`tracing.endpoint` pointing here): an OTLP/HTTP receiver built on the opentelemetry-proto package
decodes what the gateway's exporter sends (ExportTraceServiceRequest, protobuf), and an upstream
records the Trace Context each request reaches it with. Checks the spans' names, kinds, parents
and attributes for a proxied request, a refusal, forward-auth and ext_authz (gRPC and HTTP), and
that no token is in anything exported. Prints one line per check (never a token).
"""
import base64
import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from envoy.service.auth.v3 import external_auth_pb2_grpc
from otlp_receiver import CLIENT, SERVER, OTLPReceiver, attributes

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ExtAuthz"))
from envoy_check import check_request  # noqa: E402  (the CheckRequest Envoy builds, shared with the ext_authz suite)

GATEWAY = int(os.environ["PORTCULLIS_PORT"])
GRPC_PORT = int(os.environ["EXT_AUTHZ_GRPC_PORT"])
HTTP_PORT = int(os.environ["EXT_AUTHZ_HTTP_PORT"])
OTLP_PORT = int(os.environ["OTLP_PORT"])
UPSTREAM_PORT = int(os.environ["UPSTREAM_PORT"])
IDP_PORT = int(os.environ["IDP_PORT"])
# A PKCE pair for the provider sign-in's complete step (not sent: the test stops at the callback).
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(b"traces verifier " + b"v" * 40).digest()).rstrip(b"=").decode()
TOKEN = open(os.environ["PORTCULLIS_TOKEN_FILE"]).read().strip()
SESSION = open(os.environ["PORTCULLIS_SESSION_FILE"]).read().strip()

upstream_seen = {}  # request path -> (traceparents, tracestate) the upstream got
lock = threading.Lock()
receiver = None


class Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        with lock:
            upstream_seen[self.path] = (self.headers.get_all("traceparent"), self.headers.get("tracestate"))
        body = b'{"ok":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def request(port, path, headers, method="GET", source="127.0.0.1", body=None):
    """One request with `headers` as given (a name twice is sent twice), from `source`."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15, source_address=(source, 0))
    try:
        connection.putrequest(method, path)
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        request.last_body = answer.read()
        return answer.status, dict((k.lower(), v) for k, v in answer.getheaders())
    finally:
        connection.close()


def calls_of(trace_id, server_name):
    """The server span named `server_name` in the trace, and every span of the trace, once its
    calls' spans have had time to be exported (a call may end after the answer)."""
    receiver.wait(lambda _, s: s.trace_id.hex() == trace_id and s.name == server_name, 1)
    time.sleep(1)
    found = [s for _, s in receiver.of_trace(trace_id, 1)]
    return next(s for s in found if s.name == server_name), found


def store_calls_check(server, found, what):
    """Every store span of `found` is `server`'s child, named for its store method, with the
    database's conventions' attributes."""
    stores = [s for s in found if s.name.startswith("store ")]
    names = sorted(s.name for s in stores)
    check(len(stores) >= 1 and all(s.kind == CLIENT and s.parent_span_id == server.span_id for s in stores),
          f"{what}: each store call is a client span, the endpoint's child ({names})")
    check(all(attributes(s).get("db.system.name") == "sqlite" and s.name == "store " + attributes(s).get("db.operation.name", "")
              and "(" not in s.name for s in stores),
          f"{what}: a store call's span is named for its method, with db.system.name and db.operation.name")
    return names


def upgrade(headers):
    """An agent socket's WebSocket handshake with `headers`: the answer's status."""
    connection = socket.create_connection(("127.0.0.1", GATEWAY), timeout=15)
    try:
        lines = ["GET /api/runtime/agent HTTP/1.1", f"Host: 127.0.0.1:{GATEWAY}", "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: " + base64.b64encode(os.urandom(16)).decode()]
        connection.sendall(("\r\n".join(lines + [f"{n}: {v}" for n, v in headers]) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
        return int(answer.split(b" ")[1]) if answer else 0
    finally:
        connection.close()


def spans_of(trace_id, count):
    return receiver.of_trace(trace_id, count)


def traceparent(trace_id, parent, sampled=True):
    return f"00-{trace_id}-{parent}-{'01' if sampled else '00'}"


def new_ids(n):
    return os.urandom(16).hex(), os.urandom(8).hex()


def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def unsampled():
    """The gateway again with sample_ratio 0: a trace that starts there is not recorded (and
    costs no span), yet still carried on, not sampled; a trusted caller's sampled trace is."""
    global receiver
    receiver = OTLPReceiver(OTLP_PORT)
    threading.Thread(target=ThreadingHTTPServer(("127.0.0.1", UPSTREAM_PORT), Upstream).serve_forever, daemon=True).start()
    bearer = ("Authorization", f"Bearer {TOKEN}")
    status, _ = request(GATEWAY, "/api/plain/root", [bearer])
    sent, _ = upstream_seen.get("/root", (None, None))
    check(status == 200 and sent is not None and len(sent) == 1 and sent[0].endswith("-00") and len(sent[0]) == 55,
          "at sample_ratio 0 a trace started here reaches the upstream as a valid traceparent, not sampled")
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/sampled", [bearer, ("traceparent", traceparent(trace_id, parent))])
    found = spans_of(trace_id, 2)
    check(status == 200 and len(found) == 2, "at sample_ratio 0 a trusted caller's sampled trace is still recorded (parent-based)")
    started = sent[0].split("-")[1]
    check(not receiver.of_trace(started, 1, timeout=1.5), "the trace started at sample_ratio 0 is not exported")
    # A session this process has not seen (the gateway was started again): the upgrade's guard
    # reads it from the Runtime, and that call is the upgrade span's child.
    trace_id, parent = new_ids(2)
    status = upgrade([bearer, ("X-Session-Id", SESSION), ("traceparent", traceparent(trace_id, parent))])
    server, found = calls_of(trace_id, "GET /api/runtime/agent")
    calls = [s for s in found if s is not server]
    check(status == 101 and len(calls) >= 1 and all(s.kind == CLIENT and s.parent_span_id == server.span_id for s in calls)
          and any(attributes(s).get("portcullis.peer") == "runtime" for s in calls),
          f"an upgrade whose session is read from the Runtime has that call as its child span ({status} {[s.name for s in found]})")
    status, _ = request(GATEWAY, "/api/auth/verify", [bearer, ("X-Original-URI", "/api/plain/x"), ("X-Original-Method", "GET")])
    time.sleep(1)
    check(status == 200 and not any(s.name.startswith("forward_auth") for _, s in receiver.spans),
          "at sample_ratio 0 forward-auth's decision without a sampled caller makes no span")


def main():
    global receiver
    receiver = OTLPReceiver(OTLP_PORT)
    threading.Thread(target=ThreadingHTTPServer(("127.0.0.1", UPSTREAM_PORT), Upstream).serve_forever, daemon=True).start()
    user_id = claims(TOKEN)["sub"]
    bearer = ("Authorization", f"Bearer {TOKEN}")

    # 1. A proxied request continues the caller's trace: its span is the caller's child, the
    #    upstream call the span's child, and the upstream gets the call's context as its parent.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/one", [bearer, ("traceparent", traceparent(trace_id, parent)), ("tracestate", "vendor=1")])
    check(status == 200, "a traced request through the gateway is answered 200")
    found = spans_of(trace_id, 2)
    server = [s for r, s in found if s.kind == SERVER]
    client = [s for r, s in found if s.kind == CLIENT]
    check(len(server) == 1 and len(client) == 1, "a proxied request makes a server span and a client span for the upstream call")
    server, client = server[0], client[0]
    check(server.parent_span_id.hex() == parent, "the request's span is the child of the caller's traceparent")
    check(client.parent_span_id.hex() == server.span_id.hex(), "the upstream call's span is the child of the request's span")
    check(server.name == "GET /api/plain", f"the request's span is named by method and route ({server.name})")
    attrs = attributes(server)
    check(attrs.get("http.request.method") == "GET" and attrs.get("http.response.status_code") == 200,
          "the request's span carries the method and the status (HTTP semantic conventions)")
    check(attrs.get("http.route") == "/api/plain" and attrs.get("url.path") == "/api/plain/one", "the request's span carries the route and the path")
    check(attrs.get("user.id") == user_id and attrs.get("portcullis.decision") == "allowed", "the request's span names the verified user and the decision")
    cattrs = attributes(client)
    check(cattrs.get("server.port") == UPSTREAM_PORT and cattrs.get("http.response.status_code") == 200,
          "the upstream call's span names the upstream's port and its answer")
    check(found[0][0].get("service.name") == "portcullis-test", "spans carry tracing.service_name as service.name")
    sent, state = upstream_seen.get("/one", (None, None))
    check(sent == [traceparent(trace_id, client.span_id.hex())], "the upstream gets one traceparent: the caller's trace, the upstream call's span as parent")
    check(state == "vendor=1", "the caller's tracestate goes on to the upstream")

    # 1b. A session this gateway process has not yet seen (it was started again after the login): the read of it (the Runtime's answer) is
    #     a span of its own, between the request's and the upstream call's.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/session", [bearer, ("X-Session-Id", SESSION), ("traceparent", traceparent(trace_id, parent))])
    found = spans_of(trace_id, 3)
    server = [s for _, s in found if s.kind == SERVER]
    read = [s for _, s in found if s.name == "session read (runtime)"]
    check(status == 200 and len(server) == 1 and len(read) == 1 and read[0].kind == CLIENT
          and read[0].parent_span_id == server[0].span_id and read[0].end_time_unix_nano <= server[0].end_time_unix_nano,
          "a session read from the Runtime is the request's child span, ended before the request's")

    # 2. Without a traceparent a trace starts here, and the upstream is in it.
    status, _ = request(GATEWAY, "/api/plain/two", [bearer])
    sent, _ = upstream_seen.get("/two", (None, None))
    check(status == 200 and sent is not None and len(sent) == 1, "a request without trace context reaches the upstream with a new traceparent")
    started = sent[0].split("-")[1]
    found = spans_of(started, 2)
    check(len(found) == 2 and any(s.kind == SERVER and len(s.parent_span_id) == 0 for _, s in found),
          "a trace started here is exported with its root span (sample_ratio 1)")

    # 3. A caller that says "not sampled" is not recorded, but its trace goes on, still not sampled.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/three", [bearer, ("traceparent", traceparent(trace_id, parent, sampled=False))])
    sent, _ = upstream_seen.get("/three", (None, None))
    check(status == 200 and sent is not None and sent[0].startswith(f"00-{trace_id}-") and sent[0].endswith("-00"),
          "an unsampled caller's trace reaches the upstream, still unsampled")

    # 4. Two traceparents name no one parent: a new trace, and neither goes upstream.
    a, b = new_ids(2), new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/four", [bearer, ("traceparent", traceparent(*a)), ("traceparent", traceparent(*b))])
    sent, _ = upstream_seen.get("/four", (None, None))
    check(status == 200 and sent is not None and len(sent) == 1 and a[0] not in sent[0] and b[0] not in sent[0],
          "a request with two traceparents starts a trace of its own, and the upstream gets only that")

    # 4b. A client the gateway does not trust (not in gateway.trusted_proxies: 127.0.0.2 here)
    #     cannot continue a trace, nor have its request recorded by saying "sampled": its trace
    #     starts here (sample_ratio 1 records it), and the upstream gets that one.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/untrusted", [bearer, ("traceparent", traceparent(trace_id, parent))], source="127.0.0.2")
    sent, _ = upstream_seen.get("/untrusted", (None, None))
    check(status == 200 and sent is not None and len(sent) == 1 and trace_id not in sent[0],
          "an untrusted client's traceparent is not continued: its request starts a trace of its own")
    # Two spans: the request's and the upstream call's (the call's can be exported first).
    found = spans_of(sent[0].split("-")[1], 2)
    check(any(s.kind == SERVER and len(s.parent_span_id) == 0 for _, s in found), "the untrusted client's request is a root span")

    # 4c. A tracestate longer than 512 bytes is dropped; the trace it came with goes on.
    trace_id, parent = new_ids(2)
    long_state = ",".join(f"k{i}=" + "v" * 20 for i in range(25))
    status, _ = request(GATEWAY, "/api/plain/state", [bearer, ("traceparent", traceparent(trace_id, parent)), ("tracestate", long_state)])
    sent, state = upstream_seen.get("/state", (None, None))
    check(status == 200 and len(long_state) > 512 and sent is not None and sent[0].startswith(f"00-{trace_id}-") and state is None,
          "a tracestate over 512 bytes is dropped, and its traceparent still continued")

    # 5. A refusal is traced with its code; nothing reaches the upstream.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/plain/five", [("Authorization", "Bearer " + TOKEN[:-4] + "AAAA"), ("traceparent", traceparent(trace_id, parent))])
    found = spans_of(trace_id, 1)
    check(status == 401 and len(found) == 1 and found[0][1].kind == SERVER, "a refused request makes its span alone (no upstream call)")
    attrs = attributes(found[0][1])
    check(attrs.get("http.response.status_code") == 401 and attrs.get("portcullis.decision") not in (None, "allowed"),
          f"the refused request's span carries the 401 and the refusal's code ({attrs.get('portcullis.decision')})")

    # 6. Forward-auth's decision continues the original request's trace.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/auth/verify", [bearer, ("X-Original-URI", "/api/plain/six"), ("X-Original-Method", "GET"),
                                                      ("traceparent", traceparent(trace_id, parent))])
    found = spans_of(trace_id, 1)
    check(status == 200 and len(found) == 1, "forward-auth's decision is one span in the original request's trace")
    span = found[0][1]
    attrs = attributes(span)
    check(span.name == "forward_auth GET" and span.parent_span_id.hex() == parent and span.kind == SERVER,
          "forward-auth's span is named for the asker and method, the child of the original request's span")
    check(attrs.get("portcullis.decision") == "allowed" and attrs.get("user.id") == user_id and attrs.get("http.route") == "/api/plain",
          "forward-auth's span names the decision, the user and the route")

    # 6b. Forward-auth over HTTP/2 (curl, h2c with prior knowledge) is answered by Hummingbird's routes,
    # not the event loop's plain path: its span is named and filled the same way.
    trace_id, parent = new_ids(2)
    curl = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", "--http2-prior-knowledge", "-K", "-",
         f"http://127.0.0.1:{GATEWAY}/api/auth/verify", "-H", "X-Original-URI: /api/plain/six-b", "-H", "X-Original-Method: POST",
         "-H", f"traceparent: {traceparent(trace_id, parent)}"],
        input=f'header = "Authorization: Bearer {TOKEN}"\n', capture_output=True, text=True, timeout=30)
    found = spans_of(trace_id, 1)
    check(curl.stdout == "200 2" and len(found) == 1, f"forward-auth over HTTP/2 is one span in the original request's trace ({curl.stdout})")
    span = found[0][1]
    attrs = attributes(span)
    check(span.name == "forward_auth POST" and span.parent_span_id.hex() == parent and span.kind == SERVER
          and attrs.get("portcullis.decision") == "allowed" and attrs.get("user.id") == user_id and attrs.get("http.route") == "/api/plain"
          and attrs.get("url.path") == "/api/plain/six-b" and attrs.get("network.protocol.version") == "2" and attrs.get("portcullis.request_id"),
          f"forward-auth's span over HTTP/2 names the asker, the original method and path, the decision, the user and the route ({span.name} {attrs})")

    # 6c. The gateway's own endpoints (Hummingbird's routes): a span each, named for the route, with the
    # answer's status; an untrusted caller's traceparent is not followed there (its span starts a trace).
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/.well-known/jwks.json", [("traceparent", traceparent(trace_id, parent))], source="127.0.0.2")
    status_trusted, _ = request(GATEWAY, "/.well-known/jwks.json", [("traceparent", traceparent(trace_id, parent))])
    found = spans_of(trace_id, 1)
    time.sleep(1.5)  # one more export period: a second span in this trace would be the untrusted caller's
    found = spans_of(trace_id, 1)
    check(status == 200 and status_trusted == 200 and len(found) == 1 and found[0][1].name == "GET /.well-known/jwks.json"
          and found[0][1].parent_span_id.hex() == parent and found[0][1].kind == SERVER
          and attributes(found[0][1]).get("http.response.status_code") == 200 and attributes(found[0][1]).get("http.route") == "/.well-known/jwks.json",
          f"the gateway's own endpoint makes a span named for its route with the answer's status, in a trusted caller's trace only ({[s.name for _, s in found]})")

    # 6d. A method the gateway does not know (any token, over HTTP/2) is `_OTHER`, its span `HTTP`, and a
    # request no route matched names no route; the health probes make no span.
    trace_id, parent = new_ids(2)
    curl = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "-X", "FROBNICATE-X1",
         f"http://127.0.0.1:{GATEWAY}/.well-known/jwks.json", "-H", f"traceparent: {traceparent(trace_id, parent)}"],
        capture_output=True, text=True, timeout=30)
    found = spans_of(trace_id, 1)
    attrs = attributes(found[0][1]) if found else {}
    check(curl.stdout in ("404", "405") and len(found) == 1 and found[0][1].name == "HTTP" and attrs.get("http.request.method") == "_OTHER"
          and "http.route" not in attrs and "FROBNICATE" not in str(found[0][1]),
          f"an unknown method is _OTHER and its span HTTP, with no route ({curl.stdout} {[s.name for _, s in found]} {attrs})")
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/healthz", [("traceparent", traceparent(trace_id, parent))])
    time.sleep(1)
    check(status == 200 and not receiver.of_trace(trace_id, 1, timeout=1), "a health probe makes no span")

    # 6e. The calls the gateway's own endpoints make are the endpoint span's children: a password
    #     login's store calls; an intent's call to the Runtime; a provider sign-in's callback, its
    #     code exchanged at the provider's token endpoint.
    trace_id, parent = new_ids(2)
    status, _ = request(GATEWAY, "/api/auth/login", [("Content-Type", "application/json"), ("traceparent", traceparent(trace_id, parent))],
                        method="POST", body=json.dumps({"username": "bench", "password": "bench password 1"}).encode())
    check(status == 200, "a traced password login is answered 200")
    login = json.loads(request.last_body)
    secrets = ["bench password 1", "traces-client-secret", login["access_token"], login["refresh_token"], CHALLENGE]
    server, found = calls_of(trace_id, "POST /api/auth/login")
    names = store_calls_check(server, found, "a password login")
    check("store user" in names and any(attributes(s).get("portcullis.peer") == "runtime" and s.parent_span_id == server.span_id for s in found),
          f"a password login's span shows the user read from the store and the session made at the Runtime ({[s.name for s in found]})")

    trace_id, parent = new_ids(2)
    intent = json.dumps({"session_id": SESSION, "intent_type": "echo", "payload": {"n": 1}}).encode()
    status, _ = request(GATEWAY, "/api/intent", [("Content-Type", "application/json"), bearer, ("traceparent", traceparent(trace_id, parent))],
                        method="POST", body=intent)
    server, found = calls_of(trace_id, "POST /api/intent")
    runtime = [s for s in found if attributes(s).get("portcullis.peer") == "runtime"]
    check(status == 200 and len(runtime) >= 1 and all(s.kind == CLIENT and s.parent_span_id == server.span_id for s in runtime),
          f"an intent's call to the Runtime is a client span, the endpoint's child ({status}, {[s.name for s in found]})")
    rattrs = attributes(runtime[-1])
    check(runtime[-1].name == "POST" and rattrs.get("http.request.method") == "POST" and rattrs.get("http.response.status_code") == 200
          and rattrs.get("server.address") == "127.0.0.1" and isinstance(rattrs.get("server.port"), int),
          f"the Runtime call's span names the method, the Runtime's address and its answer ({rattrs})")

    anonymous_status, _ = request(GATEWAY, "/api/session/create-anonymous", [("Content-Type", "application/json")], method="POST", body=b"{}")
    anonymous = json.loads(request.last_body)["session_id"]
    start = json.dumps({"session_id": anonymous, "return_to": f"http://127.0.0.1:{GATEWAY}/demo/", "login_challenge": CHALLENGE}).encode()
    start_status, _ = request(GATEWAY, "/api/auth/oidc/idp/start", [("Content-Type", "application/json")], method="POST", body=start)
    query = urllib.parse.urlsplit(json.loads(request.last_body)["authorization_url"]).query
    approve_status, approved = request(IDP_PORT, "/auth/approve?" + query, [])
    callback = urllib.parse.urlsplit(approved["location"])
    secrets += [anonymous] + [value for name, value in urllib.parse.parse_qsl(callback.query) if name in ("code", "state")]
    trace_id, parent = new_ids(2)
    status, answered = request(GATEWAY, callback.path + "?" + callback.query, [("traceparent", traceparent(trace_id, parent))])
    check((anonymous_status, start_status, approve_status) == (201, 200, 302) and status in (302, 303) and "portcullis_login" in answered.get("location", ""),
          f"a traced sign-in through the provider comes back to the callback and is sent on ({anonymous_status} {start_status} {approve_status} {status})")
    callback_span = receiver.wait(lambda _, s: s.trace_id.hex() == trace_id and s.kind == SERVER, 1)[0][1].name
    server, found = calls_of(trace_id, callback_span)
    token_calls = [s for s in found if attributes(s).get("portcullis.peer") == "provider" and s.name == "POST"]
    check(callback_span.startswith("GET /api/auth/oidc/") and len(token_calls) == 1 and token_calls[0].kind == CLIENT
          and token_calls[0].parent_span_id == server.span_id,
          f"the callback's code exchange at the provider's token endpoint is a client span, the callback's child ({callback_span}, {[s.name for s in found]})")
    tattrs = attributes(token_calls[0])
    check(tattrs.get("server.address") == "127.0.0.1" and tattrs.get("server.port") == IDP_PORT and tattrs.get("http.response.status_code") == 200
          and "url.full" not in tattrs and "url.path" not in tattrs,
          f"the token endpoint's span names the provider's address, port and answer, and no URL ({tattrs})")
    store_calls_check(server, found, "a provider sign-in's callback")

    # 6f. An agent socket's upgrade: a span of its own, 101 and the user when admitted; a refusal
    #     with its status and code. (The unsampled phase checks the calls of one whose session the
    #     gateway has not seen.)
    trace_id, parent = new_ids(2)
    status = upgrade([bearer, ("X-Session-Id", SESSION), ("traceparent", traceparent(trace_id, parent))])
    server, found = calls_of(trace_id, "GET /api/runtime/agent")
    attrs = attributes(server)
    check(status == 101 and server.kind == SERVER and server.parent_span_id.hex() == parent and attrs.get("http.response.status_code") == 101
          and attrs.get("portcullis.decision") == "allowed" and attrs.get("user.id") == user_id and attrs.get("http.route") == "/api/runtime/agent",
          f"an agent socket's upgrade is a span in the caller's trace: 101, allowed, the user ({status} {attrs})")
    trace_id, parent = new_ids(2)
    status = upgrade([("X-Session-Id", SESSION), ("traceparent", traceparent(trace_id, parent))])
    server, _ = calls_of(trace_id, "GET /api/runtime/agent")
    attrs = attributes(server)
    check(status == 401 and attrs.get("http.response.status_code") == 401 and attrs.get("portcullis.decision") == "token_missing"
          and "user.id" not in attrs,
          f"a refused upgrade's span carries its status and stable code, and no user ({status} {attrs})")

    # 7. ext_authz over gRPC and HTTP: the trace context among the original request's headers.
    for mode in ("grpc", "http"):
        trace_id, parent = new_ids(2)
        headers = [("authorization", f"Bearer {TOKEN}"), ("traceparent", traceparent(trace_id, parent))]
        if mode == "grpc":
            with grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}") as channel:
                answer = external_auth_pb2_grpc.AuthorizationStub(channel).Check(check_request("GET", "/api/plain/seven", headers), timeout=15)
            allowed = answer.status.code == 0
        else:
            status, _ = request(HTTP_PORT, "/ext-authz/api/plain/seven", headers)
            allowed = status == 200
        found = spans_of(trace_id, 1)
        check(allowed and len(found) == 1, f"ext_authz ({mode}) allows, and its decision is one span in the original request's trace")
        span = found[0][1]
        attrs = attributes(span)
        check(span.name == "ext_authz GET" and span.parent_span_id.hex() == parent and attrs.get("portcullis.asker") == "ext_authz"
              and attrs.get("portcullis.decision") == "allowed",
              f"ext_authz's ({mode}) span is named for the asker, the child of the original request's, with the decision")

    # 7b. Envoy's own span for a gRPC check, in the call's metadata, is the decision's parent (the
    #     original request's trace among the headers is Envoy's span's too).
    trace_id, parent = new_ids(2)
    envoy_span = os.urandom(8).hex()
    headers = [("authorization", f"Bearer {TOKEN}"), ("traceparent", traceparent(trace_id, parent))]
    with grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}") as channel:
        answer = external_auth_pb2_grpc.AuthorizationStub(channel).Check(
            check_request("GET", "/api/plain/seven", headers), timeout=15, metadata=(("traceparent", traceparent(trace_id, envoy_span)),))
    found = spans_of(trace_id, 1)
    check(answer.status.code == 0 and len(found) == 1 and found[0][1].parent_span_id.hex() == envoy_span,
          "ext_authz (grpc): Envoy's check span, named in the call's metadata, is the decision span's parent")

    # 8. No secret in anything exported.
    exported = receiver.exported()
    signature = TOKEN.split(".")[2].encode()
    check(TOKEN.encode() not in exported and signature not in exported, "no token, nor a token's signature, is in any span exported")
    check(len(secrets) >= 8 and not [s for s in secrets if s.encode() in exported],
          "no password, client secret, refresh token, authorization code, state, PKCE challenge or session id is in any span exported")
    print(f"traces: {len(receiver.spans)} spans received in {len(receiver.bodies)} exports")


unsampled() if os.environ.get("TRACES_PHASE") == "unsampled" else main()
