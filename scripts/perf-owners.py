#!/usr/bin/env python3
"""Who owns the user time of a profile: each user-space sample charged to the
innermost frame of the project's own modules on its stack (the Swift runtime,
libc and NIO calls a gateway function makes are charged to it); samples with no
such frame are "NIO/other". A flat profile by symbol spreads retain/release,
exclusivity checks and ByteBuffer writes over every caller; this puts them back.

    perf report -i FILE                  # the usual views
    scripts/perf-owners.py FILE [N]      # the N largest owners (default 30)

FILE is a `perf record -g` file, such as `PROFILE=1 scripts/bench-proxy.sh` writes
(.build/bench-proxy.perf.data). Needs perf (linux-perf) and `swift demangle`.
"""
import collections
import re
import subprocess
import sys

# The project's modules, as their names appear in mangled Swift symbols ($s<length><name>).
MODULES = ["Gateway", "DataPlane", "EdgeHTTP", "Observability", "RuntimeAccess", "MCPPolicy", "MCPResource", "AuthorizationServer", "ProviderLogin", "TrafficCop", "SecurityGuard", "JOSE", "Runtime", "RuntimeAPI", "StateSurface", "TrustedIssuers", "Resilience"]
PREFIXES = tuple(f"$s{len(name)}{name}" for name in MODULES)
FRAME = re.compile(r"^\s*[0-9a-f]+ (.*) \((.*)\)$")


def samples(path):
    """Each sample's stack, innermost frame first, as (symbol, dso) pairs."""
    script = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym,dso"], capture_output=True, text=True, check=True).stdout
    stack = []
    for line in script.splitlines():
        match = FRAME.match(line)
        if match:
            stack.append((match.group(1), match.group(2)))
        elif stack:
            yield stack
            stack = []
    if stack:
        yield stack


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30
    total = 0
    owners = collections.Counter()
    for stack in samples(path):
        total += 1
        if "kernel" in stack[0][1]:
            continue
        owner = next((symbol for symbol, _ in stack if symbol.startswith(PREFIXES)), "NIO/other")
        owners[owner] += 1
    user = sum(owners.values())
    if total == 0 or user == 0:
        sys.exit(f"perf-owners.py: no user-space samples in {path}")
    top = owners.most_common(count)
    names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(name for name, _ in top), capture_output=True, text=True).stdout.splitlines()
    print(f"{total} samples, {user} in user space ({100 * user / total:.1f}%)")
    print("% of all  % of user  owner")
    for (_, samples_owned), name in zip(top, names):
        print(f"{100 * samples_owned / total:7.2f}  {100 * samples_owned / user:8.1f}   {name[:150]}")


if __name__ == "__main__":
    main()
