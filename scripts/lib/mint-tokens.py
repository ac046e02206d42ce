#!/usr/bin/env python3
"""Mints COUNT access tokens, one per person (sub bench-0 ... bench-N), as `portcullis token
issue` would with the active key of KEYS_DIR: ES256, typ at+jwt, the RFC 9068 claims. One token a
line in OUT. For the cost curve's people dimension (scripts/bench-scale.sh), where minting a
million through the command line would take an hour.

  mint-tokens.py KEYS_DIR ISSUER AUDIENCE COUNT OUT [TTL_SECONDS]

Needs the `cryptography` package. The tokens are secrets of a throwaway key: OUT is made 0600.
"""
import base64, json, os, secrets, sys, time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def main() -> None:
    keys_dir, issuer, audience, count, out = sys.argv[1:6]
    ttl = int(sys.argv[6]) if len(sys.argv) > 6 else 3600
    keyring = json.load(open(os.path.join(keys_dir, "keyring.json")))
    active = next(k for k in keyring["keys"] if k["status"] == "active")
    if active["alg"] != "ES256":
        sys.exit(f"mint-tokens.py: the active key is {active['alg']}; only ES256 is minted here")
    with open(os.path.join(keys_dir, active["kid"] + ".pem"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    header = b64(json.dumps({"alg": "ES256", "typ": "at+jwt", "kid": active["kid"]}, separators=(",", ":")).encode())
    now = int(time.time())
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        for n in range(int(count)):
            claims = {"iss": issuer, "sub": f"bench-{n}", "aud": audience, "exp": now + ttl, "iat": now, "nbf": now,
                      "jti": b64(secrets.token_bytes(16)).decode(), "client_id": "bench", "tenant_id": "default"}
            signing_input = header + b"." + b64(json.dumps(claims, separators=(",", ":")).encode())
            r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            f.write(signing_input + b"." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")) + b"\n")


if __name__ == "__main__":
    main()
