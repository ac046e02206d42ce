"""ext_authz with mutual TLS (ext_authz.tls) against the real `portcullis serve`, started by
scripts/ext-authz-tests.sh with certificates openssl made in MESH_DIR: grpcio (gRPC core's
BoringSSL) and Python's ssl module (OpenSSL) ask as an Envoy whose certificate names the listed
SPIFFE ID, as another workload the same CA signed, as another CA's certificate with the listed
name, and with no certificate. Prints one line per check (never a token).
"""
import os
import socket
import ssl
import sys
import time

import grpc
from envoy.service.auth.v3 import external_auth_pb2_grpc
from envoy_check import check_request

GRPC_PORT = int(os.environ["EXT_AUTHZ_GRPC_PORT"])
HTTP_PORT = int(os.environ["EXT_AUTHZ_HTTP_PORT"])
TOKEN = open(os.environ["PORTCULLIS_TOKEN_FILE"]).read().strip()
MESH = os.environ["MESH_DIR"]


def check(condition, rule):
    if not condition:
        print(f"FAIL  {rule}")
        sys.exit(1)
    print(f"ok    {rule}")


def read(name):
    with open(os.path.join(MESH, name), "rb") as file:
        return file.read()


def grpc_check(identity, method, path, headers):
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read("mesh-ca.pem"),
        private_key=read(identity + ".key") if identity else None,
        certificate_chain=read(identity + ".pem") if identity else None)
    with grpc.secure_channel(f"127.0.0.1:{GRPC_PORT}", credentials) as channel:
        return external_auth_pb2_grpc.AuthorizationStub(channel).Check(check_request(method, path, headers), timeout=15)


def https_status(identity, path, headers):
    """The status line's code of an HTTP-mode check over TLS as `identity`, or None when the
    connection fails or closes unanswered."""
    context = ssl.create_default_context(cafile=os.path.join(MESH, "mesh-ca.pem"))
    if identity:
        context.load_cert_chain(os.path.join(MESH, identity + ".pem"), os.path.join(MESH, identity + ".key"))
    request = f"GET /ext-authz{path} HTTP/1.1\r\nHost: app.example.test\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "Connection: close\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", HTTP_PORT), timeout=15) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(request.encode())
                answer = b""
                while chunk := tls.recv(4096):
                    answer += chunk
    except (OSError, ssl.SSLError):
        return None
    if not answer.startswith(b"HTTP/1.1 "):
        return None
    return int(answer[9:12])


bearer = [("Authorization", "Bearer " + TOKEN)]
allowed = grpc_check("envoy", "GET", "/api/plain/x", bearer)
check(allowed.status.code == 0 and allowed.WhichOneof("http_response") == "ok_response", "gRPC over mTLS: the listed Envoy's check is allowed")
missing = grpc_check("envoy", "GET", "/api/plain/x", [])
check(missing.denied_response.status.code == 401, "gRPC over mTLS: the listed Envoy's check without a token is denied 401")
refused = grpc_check("workload", "GET", "/api/plain/x", bearer)
check(refused.status.code == 7 and refused.denied_response.status.code == 403 and b"ext_authz_caller_refused" in refused.denied_response.body.encode(),
      "gRPC over mTLS: a workload the CA signed, named in no caller_names, is denied 403 ext_authz_caller_refused (status 7)")
for identity, why in [("impostor", "another CA's certificate with the listed name"), (None, "no certificate")]:
    try:
        grpc_check(identity, "GET", "/public/status", [])
        check(False, f"gRPC over mTLS: {why} never reaches a decision")
    except grpc.RpcError as failure:
        check(failure.code() == grpc.StatusCode.UNAVAILABLE, f"gRPC over mTLS: {why} never reaches a decision ({failure.code().name})")
try:
    with grpc.insecure_channel(f"127.0.0.1:{GRPC_PORT}") as channel:
        external_auth_pb2_grpc.AuthorizationStub(channel).Check(check_request("GET", "/public/status", []), timeout=5)
    check(False, "gRPC: plaintext to a TLS listener is never answered")
except grpc.RpcError as failure:
    check(failure.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), f"gRPC: plaintext to a TLS listener is never answered ({failure.code().name})")

check(https_status("envoy", "/api/plain/x", bearer) == 200, "HTTP mode over mTLS: the listed Envoy's check is 200")
check(https_status("envoy", "/api/plain/x", []) == 401, "HTTP mode over mTLS: without a token, 401")
for identity, why in [("workload", "another workload the CA signed"), ("impostor", "another CA's certificate"), (None, "no certificate")]:
    check(https_status(identity, "/public/status", []) is None, f"HTTP mode over mTLS: {why} is closed on unanswered")
plain = socket.create_connection(("127.0.0.1", HTTP_PORT), timeout=15)
plain.sendall(b"GET /ext-authz/public/status HTTP/1.1\r\nHost: app.example.test\r\n\r\n")
try:
    answered = plain.recv(100)
except OSError:
    answered = b""
plain.close()
check(not answered.startswith(b"HTTP/"), "HTTP mode: plaintext to a TLS listener gets no HTTP answer")
