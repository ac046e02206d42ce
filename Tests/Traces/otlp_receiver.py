"""An OTLP/HTTP trace receiver for the tests (Debian packages no OpenTelemetry Collector): it
decodes each `POST /v1/traces` as opentelemetry-proto's `ExportTraceServiceRequest` and keeps the
spans, with their resource's attributes, and every body as received (to look for secrets in).
Used by Tests/Traces/test_traces.py and Tests/MCP/test_mcp.py.
"""
import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

SERVER, CLIENT = trace_pb2.Span.SPAN_KIND_SERVER, trace_pb2.Span.SPAN_KIND_CLIENT


class OTLPReceiver:
    def __init__(self, port):
        self.spans = []   # (resource attributes, span)
        self.bodies = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.bodies.append(body)
                    for resource_spans in request.resource_spans:
                        resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                        for scope in resource_spans.scope_spans:
                            receiver.spans.extend((resource, span) for span in scope.spans)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait(self, matches, count=1, timeout=20.0):
        """The spans `matches(resource, span)` accepts, once `count` have come (spans come in batches)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                found = [(r, s) for r, s in self.spans if matches(r, s)]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    def of_trace(self, trace_id, count, timeout=20.0):
        return self.wait(lambda _, span: span.trace_id.hex() == trace_id, count, timeout)

    def exported(self):
        with self.lock:
            return b"".join(self.bodies)


def attributes(span):
    """A span's attributes as a dict of plain values."""
    values = {}
    for attribute in span.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind) if kind else None
    return values
