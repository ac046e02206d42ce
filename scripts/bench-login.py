"""Login round trips through the provider (scripts/bench-login.sh runs it): each round trip is a
new anonymous session, start, the provider's approval (its login page is skipped), the gateway's
callback (which exchanges the code at the provider's token endpoint and verifies the ID token),
and the completion. Prints one JSON line: round trips, seconds, failures, and the CPU seconds the
gateway and the provider spent (from /proc/PID/stat), never a token or code."""
import base64
import hashlib
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

GATEWAY, IDP = os.environ["GATEWAY"], os.environ["IDP"]
SECONDS, WORKERS = float(sys.argv[1]), int(sys.argv[2])
TICKS = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def request(connection, method, path, body=None, headers=None):
    connection.request(method, path, body=body, headers=headers or {})
    answer = connection.getresponse()
    return answer.status, answer.getheader("Location"), answer.read()


def round_trip(gateway, idp, verifier, challenge):
    status, _, body = request(gateway, "POST", "/api/session/create-anonymous", b"{}", {"Content-Type": "application/json"})
    session = json.loads(body)["session_id"]
    start = json.dumps({"session_id": session, "return_to": GATEWAY + "/demo/", "login_challenge": challenge}).encode()
    status, _, body = request(gateway, "POST", "/api/auth/oidc/bench/start", start, {"Content-Type": "application/json"})
    url = urllib.parse.urlsplit(json.loads(body)["authorization_url"])
    status, location, _ = request(idp, "GET", "/auth/approve?" + url.query)
    callback = urllib.parse.urlsplit(location)
    status, location, _ = request(gateway, "GET", callback.path + "?" + callback.query)
    code = urllib.parse.parse_qs(location.split("#", 1)[1])["portcullis_login"][0]
    done = json.dumps({"login_code": code, "session_id": session, "login_verifier": verifier}).encode()
    status, _, body = request(gateway, "POST", "/api/auth/oidc/complete", done, {"Content-Type": "application/json"})
    return status == 200 and "access_token" in json.loads(body)


def worker(stop, counts, lock):
    verifier = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    host = lambda base: http.client.HTTPConnection(*urllib.parse.urlsplit(base).netloc.split(":"), timeout=30)
    gateway, idp = host(GATEWAY), host(IDP)
    while time.time() < stop:
        try:
            ok = round_trip(gateway, idp, verifier, challenge)
        except Exception:
            ok = False
            gateway, idp = host(GATEWAY), host(IDP)
        with lock:
            counts["ok" if ok else "failed"] += 1


def main():
    gateway_pid, idp_pid = int(os.environ["GATEWAY_PID"]), int(os.environ["IDP_PID"])
    counts, lock = {"ok": 0, "failed": 0}, threading.Lock()
    before = (cpu(gateway_pid), cpu(idp_pid))
    started = time.time()
    threads = [threading.Thread(target=worker, args=(started + SECONDS, counts, lock)) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.time() - started
    after = (cpu(gateway_pid), cpu(idp_pid))
    print(json.dumps({"round_trips": counts["ok"], "failed": counts["failed"], "seconds": round(elapsed, 2),
                      "gateway_cpu_s": round(after[0] - before[0], 2), "idp_cpu_s": round(after[1] - before[1], 2)}))


if __name__ == "__main__":
    main()
