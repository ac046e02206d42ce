#!/usr/bin/env python3
"""Sequential latency of gateway routes over one keep-alive connection.

Usage: scripts/latency.py [BASE_URL] [REQUESTS]
Needs a running `portcullis serve` with a user alice (tenant default) whose
password is in the PORTCULLIS_PASSWORD environment variable. Prints p50/p99
per route; /healthz is the baseline (the gateway's HTTP path with no auth and
no Runtime call).
"""
import http.client, json, os, sys, time, urllib.parse

base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
url = urllib.parse.urlparse(base)
conn = http.client.HTTPConnection(url.hostname, url.port)

def call(method, path, body=None, headers=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers or {})
    response = conn.getresponse()
    data = response.read()
    return response.status, data

def measure(name, method, path, body=None, headers=None, n=count, expect=200):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        status, _ = call(method, path, body, headers)
        times.append(time.perf_counter() - start)
        assert status == expect, (name, status)
    times.sort()
    p50, p99 = times[len(times) // 2] * 1000, times[int(len(times) * 0.99)] * 1000
    print(f"{name:44s} n={n:5d}  p50 {p50:7.3f} ms  p99 {p99:7.3f} ms")
    return p50

status, data = call("POST", "/api/session/create-anonymous")
session = json.loads(data)["session_id"]
status, data = call("POST", "/api/auth/login", {"username": "alice", "password": os.environ["PORTCULLIS_PASSWORD"], "session_id": session})
assert status == 200, data
token = json.loads(data)["access_token"]
auth = {"Authorization": "Bearer " + token}
base_p50 = measure("GET /healthz (baseline)", "GET", "/healthz")
measure("GET /.well-known/jwks.json", "GET", "/.well-known/jwks.json")
read_p50 = measure("GET /api/session/{id} (token + Runtime hop)", "GET", f"/api/session/{session}", headers=auth)
measure("POST /api/session/create-anonymous", "POST", "/api/session/create-anonymous", n=min(count, 25), expect=201)
measure("POST /api/auth/login (scrypt N=2^15)", "POST", "/api/auth/login",
        {"username": "alice", "password": os.environ["PORTCULLIS_PASSWORD"]}, n=4)  # login_per_username burst is 5
print(f"authenticated session read adds {read_p50 - base_p50:.3f} ms at the median over /healthz")
