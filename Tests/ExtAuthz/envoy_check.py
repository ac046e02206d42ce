"""The CheckRequest Envoy builds for a request, with the xds-protos package's own Envoy messages;
shared by Tests/ExtAuthz/test_ext_authz.py and Tests/Traces/test_traces.py."""
from envoy.service.auth.v3 import attribute_context_pb2, external_auth_pb2


def check_request(method, path, headers):
    """The CheckRequest Envoy builds for a request (headers lower-cased, pseudo-headers beside them)."""
    http = attribute_context_pb2.AttributeContext.HttpRequest(
        id="7", method=method, path=path, host="app.example.test", scheme="https", protocol="HTTP/1.1")
    http.headers.update({":method": method, ":path": path, ":authority": "app.example.test", ":scheme": "https"})
    http.headers.update({name.lower(): value for name, value in headers})
    request = external_auth_pb2.CheckRequest()
    request.attributes.request.http.CopyFrom(http)
    request.attributes.source.address.socket_address.address = "203.0.113.9"
    request.attributes.source.address.socket_address.port_value = 40000
    return request
