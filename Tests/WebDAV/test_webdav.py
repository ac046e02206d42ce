"""COPY and MOVE through the gateway to a real WebDAV server (wsgidav), run by scripts/webdav-tests.sh.

Two routes to one server: /dav/pub (the caller is admitted) and /dav/adm (a route whose policy
refuses them). A Destination is decided as a request target is: one field, on the host the request
was sent to, normalised, on the same route, and rewritten to the upstream's namespace. Every way to
name a file behind /dav/adm (its path, dot segments plain or encoded, the upstream's own address,
another host, two fields) is refused and the file is unchanged; a copy and a move within /dav/pub work.

Environment: GATEWAY (127.0.0.1:PORT), UPSTREAM (127.0.0.1:PORT, wsgidav), ROOT (its directory), TOKEN (the caller's).
"""
import http.client
import json
import os
import sys

GATEWAY, UPSTREAM, ROOT, TOKEN = os.environ["GATEWAY"], os.environ["UPSTREAM"], os.environ["ROOT"], os.environ["TOKEN"]
FAILURES = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what)
    if not condition:
        FAILURES.append(what)


def send(method, path, destinations=(), headers=None, host=None):
    connection = http.client.HTTPConnection(GATEWAY, timeout=10)
    connection.putrequest(method, path, skip_accept_encoding=True, skip_host=host is not None)
    if host is not None:
        connection.putheader("Host", host)
    connection.putheader("Authorization", "Bearer " + TOKEN)
    for destination in destinations:
        connection.putheader("Destination", destination)
    for name, value in (headers or {}).items():
        connection.putheader(name, value)
    connection.putheader("Content-Length", "0")
    connection.endheaders()
    answer = connection.getresponse()
    body = answer.read()
    connection.close()
    try:
        code = json.loads(body).get("error", "")
    except ValueError:
        code = ""
    return answer.status, code, body


def secret():
    with open(os.path.join(ROOT, "adm", "secret.txt")) as f:
        return f.read()


status, _, _ = send("GET", "/dav/adm/secret.txt")
check(status == 403, f"the caller is refused at /dav/adm ({status})")
here = "http://" + GATEWAY
attacks = [
    ("the other route's URL", [here + "/dav/adm/secret.txt"], 403),
    ("the other route's path", ["/dav/adm/secret.txt"], 403),
    ("a dot segment out of /dav/pub", [here + "/dav/pub/../adm/secret.txt"], 403),
    ("an encoded dot segment", [here + "/dav/pub/%2e%2E/adm/secret.txt"], 403),
    ("the upstream's own address", ["http://" + UPSTREAM + "/adm/secret.txt"], 403),
    ("another host", ["http://evil.example/dav/pub/x.txt"], 403),
    ("an encoded slash", [here + "/dav/pub/..%2fadm%2fsecret.txt"], 400),
    ("two Destination fields", [here + "/dav/pub/b.txt", here + "/dav/adm/secret.txt"], 400),
    ("no Destination", [], 400),
    ("a query", [here + "/dav/pub/b.txt?x=1"], 400),
]
for method in ("COPY", "MOVE"):
    for what, destinations, expected in attacks:
        status, code, _ = send(method, "/dav/pub/a.txt", destinations, {"Overwrite": "T"})
        check(status == expected and code.startswith("destination_"), f"{method} to {what}: {expected} ({status} {code})")
check(secret() == "secret" and sorted(os.listdir(os.path.join(ROOT, "adm"))) == ["secret.txt"], "the file behind /dav/adm is unchanged, nothing new beside it")
check(os.path.exists(os.path.join(ROOT, "pub", "a.txt")), "and the source was not moved")

# A route over the whole server (/dav) beside the routes over its folders: a folder holding another
# route's files is refused as a source and as a destination, and a deep PROPFIND or LOCK of it.
for method, path, destinations in (("COPY", "/dav/", [here + "/dav/loot/"]), ("MOVE", "/dav/", [here + "/dav/loot/"]), ("DELETE", "/dav/", []),
                                   ("COPY", "/dav/pub/a.txt", [here + "/dav/adm/x.txt"])):
    status, code, _ = send(method, path, destinations, {"Depth": "infinity", "Overwrite": "T"})
    check(status == 403 and code == "destination_refused", f"{method} {path} reaching another route's files: 403 ({status} {code})")
for method, depth in (("PROPFIND", "infinity"), ("PROPFIND", None), ("LOCK", "infinity"), ("LOCK", None)):
    headers = {"Depth": depth} if depth else {}
    status, code, body = send(method, "/dav/", headers=headers)
    check(status == 403 and code == "depth_refused" and b"secret" not in body, f"{method} /dav/ with Depth {depth or '(none: infinity)'}: 403 depth_refused ({status} {code})")
status, _, body = send("PROPFIND", "/dav/", headers={"Depth": "1"})
check(status == 207 and b"adm/" in body and b"secret.txt" not in body, f"PROPFIND /dav/ with Depth 1 names the folders, not their files ({status})")
status, _, body = send("PROPFIND", "/dav/pub/", headers={"Depth": "infinity"})
check(status in (207, 403) and b"secret" not in body, f"a deep PROPFIND of a folder holding no other route's files is the server's to answer ({status})")
check(secret() == "secret" and not os.path.exists(os.path.join(ROOT, "loot")), "the other route's files are where they were, nothing copied out")

# The Destination's host in another case, or with its scheme's default port, is the request's host.
for host, destination in (("dav.example", "http://DAV.example/dav/pub/e.txt"), ("dav.example", "http://dav.example:80/dav/pub/f.txt"),
                          ("dav.example:80", "http://dav.example/dav/pub/g.txt")):
    status, code, _ = send("COPY", "/dav/pub/a.txt", [destination], host=host)
    check(status in (201, 204), f"COPY with Host {host} to {destination} ({status} {code})")
status, code, _ = send("COPY", "/dav/pub/a.txt", ["http://dav.example:8080/dav/pub/h.txt"], host="dav.example")
check(status == 403 and code == "destination_refused", f"another port is another host ({status} {code})")

status, _, _ = send("COPY", "/dav/pub/a.txt", [here + "/dav/pub/b.txt"])
check(status in (201, 204) and open(os.path.join(ROOT, "pub", "b.txt")).read() == "public", f"COPY within the route, by URL ({status})")
status, _, _ = send("MOVE", "/dav/pub/b.txt", ["/dav/pub/c.txt"])
check(status in (201, 204) and os.path.exists(os.path.join(ROOT, "pub", "c.txt")) and not os.path.exists(os.path.join(ROOT, "pub", "b.txt")),
      f"MOVE within the route, by path ({status})")
status, _, _ = send("MOVE", "/dav/pub/c.txt", [here + "/dav/pub/./sub/../d.txt"])
check(status in (201, 204) and os.path.exists(os.path.join(ROOT, "pub", "d.txt")), f"a Destination normalised within the route ({status})")
if FAILURES:
    print(f"{len(FAILURES)} failed")
    sys.exit(1)
