"""The guides' commands, run as written (scripts/guides-test.sh starts this; read it there).

A ```console block is a terminal session: each `$ ` line (with its `\\` continuation lines) is a
command, and the lines after it, up to the next `$ `, are what it prints. A command with printed
lines must print them (`...` stands for any text; a kid, a time, a long number and "N days ago"
may differ, since they differ on every run); one without must exit 0. A ```sh block runs whole
and must exit 0. The commands of one guide run in one bash, in order, so `$S` and `$T` carry over
as they do in a reader's terminal.

The substitutions are stated in SUBSTITUTIONS, and nowhere else: the password a command asks for
on the terminal comes on stdin, YOUR PASSWORD is the password, PID is serve's, OLD-KID is the key
the rotation retired; several-instances.md's database is this run's own cluster. websocat (not a Debian package) is not run; scripts/sockets.sh and the Swift
suite drive the agent socket with headers instead.

Prints one line per command checked (never a token), and exits 1 on the first difference.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

ROOT, WORK = sys.argv[1], sys.argv[2]
PASSWORD = os.environ["PASSWORD"]
SERVE_PID = os.environ["SERVE_PID"]
API_DIR = os.path.join(WORK, "home", "api")
TOUR_DIR = os.path.join(WORK, "home", "tour")


def fail(message):
    print(f"FAIL  {message}")
    sys.exit(1)


def ok(message):
    print(f"ok    {message}")


def blocks(guide, language):
    text = open(os.path.join(ROOT, "docs", "guides", guide)).read()
    return re.findall(r"```" + language + r"\n(.*?)```", text, re.S)


def console_steps(block):
    """[(command, [expected lines])] of one console block."""
    steps, lines = [], block.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            if not steps:
                fail(f"a console block starts with a line that is not a command: {line!r}")
            steps[-1][1].append(line)
            index += 1
            continue
        command = line[2:]
        while command.rstrip().endswith("\\"):
            index += 1
            command = command.rstrip()[:-1] + " " + lines[index].strip()
        steps.append((command, []))
        index += 1
    return steps


VOLATILE = [
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"),
    (re.compile(r"[A-Za-z0-9_-]{20,}"), r"[A-Za-z0-9_-]{20,}"),
    (re.compile(r"\d{6,}"), r"\d{6,}"),
    (re.compile(r"\d+ (?:second|minute|day)s? ago"), r"\d+ (?:second|minute|day)s? ago"),
]


def pattern(expected):
    """A regular expression for one expected line: `...` is any text, VOLATILE values any value of their kind."""
    out, position = "", 0
    spans = []
    for finder, _ in VOLATILE:
        for match in finder.finditer(expected):
            if not any(start < match.end() and match.start() < end for start, end, _ in spans):
                spans.append((match.start(), match.end(), finder))
    spans.sort(key=lambda span: span[0])
    for start, end, finder in spans:
        out += literal(expected[position:start]) + dict(VOLATILE)[finder]
        position = end
    out += literal(expected[position:])
    return re.compile(out + r"\Z")


def literal(text):
    return re.escape(text).replace(r"\.\.\.", ".*")


SUBSTITUTIONS = {
    # users add asks for the password twice on a terminal; here it comes on stdin.
    "# asks for the password twice": lambda command: "\n".join(
        line.replace(" # ", " --password-stdin <<<\"$PASSWORD\" # ", 1) if "# asks for the password twice" in line else line
        for line in command.split("\n")),
    "YOUR PASSWORD": lambda command: command.replace("YOUR PASSWORD", PASSWORD),
    # several-instances.md: the database host is this run's own cluster (PGHOST, PGPORT), whose
    # superuser `postgres` the commands reach as PGUSER instead of through sudo; the role's
    # password (asked twice on a terminal) comes on stdin; `portcullis users add` reads alice's
    # password from stdin; the processes sent to the background are noted to be stopped, and the
    # gateway, which the guide runs in the foreground, goes to the background too.
    "sudo -u postgres createuser --pwprompt": lambda command: 'printf "%s\\n%s\\n" "$DB_PASSWORD" "$DB_PASSWORD" | ' + command.replace("sudo -u postgres ", "", 1),
    "sudo -u postgres createdb": lambda command: command.replace("sudo -u postgres ", "", 1),
    "portcullis:PASSWORD@db.internal:5432": lambda command: command.replace("PASSWORD@db.internal:5432", "$DB_PASSWORD@127.0.0.1:$PGPORT"),
    "portcullis users add alice --tenant acme ": lambda command: command.replace(" # ", " --password-stdin <<<\"$PASSWORD\" # ", 1),
    "portcullis runtime --port 8081": lambda command: command.replace(" &", " & echo $! >> \"$BACKGROUND_PIDS\"", 1),
    "portcullis gateway": lambda command: command + " & echo $! >> \"$BACKGROUND_PIDS\"",
    # browser-app.md: the processes it sends to the background are noted to be stopped.
    "radicale --config radicale.conf &": lambda command: command.replace(
        "radicale --config radicale.conf &", "radicale --config radicale.conf > radicale.log 2>&1 & echo $! >> \"$BACKGROUND_PIDS\"", 1),
    "python3 app.py &": lambda command: command.replace("python3 app.py &", "python3 app.py & echo $! >> \"$BACKGROUND_PIDS\"", 1),
    "portcullis serve &": lambda command: command.replace("portcullis serve &", "portcullis serve > serve.log 2>&1 & echo $! >> \"$BACKGROUND_PIDS\"", 1),
    # agents-act-as-their-person.md: the service it sends to the background is noted to be stopped too.
    "venv/bin/python service.py > service.log 2>&1 &": lambda command: command.replace(
        "venv/bin/python service.py > service.log 2>&1 &", "venv/bin/python service.py > service.log 2>&1 & echo $! >> \"$BACKGROUND_PIDS\"", 1),
    # mcp.md: the MCP server it sends to the background is noted to be stopped.
    "venv/bin/python server.py > server.log 2>&1 &": lambda command: command.replace(
        "venv/bin/python server.py > server.log 2>&1 &", "venv/bin/python server.py > server.log 2>&1 & echo $! >> \"$BACKGROUND_PIDS\"", 1),
}


def prepare(command):
    for marker, substitute in SUBSTITUTIONS.items():
        if marker in command:
            command = substitute(command)
    return command


def run_session(name, directory, steps, extra_env=None):
    """Runs the steps in one bash in `directory`, then compares what each printed."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
    script = ["set -u"]
    for number, (command, _) in enumerate(steps):
        script.append(f"{{ {prepare(command)}\n}} > {WORK}/out.{slug}.{number} 2>&1; echo $? > {WORK}/rc.{slug}.{number}")
    env = dict(os.environ, **(extra_env or {}))
    try:
        # A session of its own (no controlling terminal): a command that asks on the terminal reads stdin.
        subprocess.run(["bash", "-c", "\n".join(script)], cwd=directory, env=env, timeout=180, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        fail(f"{name}: the session did not finish within 180 s")
    for number, (command, expected) in enumerate(steps):
        printed = open(f"{WORK}/out.{slug}.{number}").read().rstrip("\n").splitlines()
        status = int(open(f"{WORK}/rc.{slug}.{number}").read())
        shown = command.split("#")[0].strip()[:90]
        if not expected:
            if status != 0:
                fail(f"{name}: `{shown}` exits {status}: {redact(printed)}")
        else:
            if not matches(expected, printed):
                fail(f"{name}: `{shown}` printed\n{redact(printed)}\nwhere the guide says\n" + "\n".join(expected))
        ok(f"{name}: {shown}")


def matches(expected, printed):
    """Whether `printed` is what the guide shows. The command's notes on standard error
    (`portcullis: ...`) and its output on standard output are each compared in order, but not
    with each other: through a pipe their order is not the terminal's (stdout is buffered)."""
    def split(lines):
        notes = [line for line in lines if line.startswith("portcullis: ")]
        return notes, [line for line in lines if not line.startswith("portcullis: ")]
    (expected_notes, expected_out), (printed_notes, printed_out) = split(expected), split(printed)
    return all(len(e) == len(p) and all(pattern(x).match(y) for x, y in zip(e, p))
               for e, p in ((expected_notes, printed_notes), (expected_out, printed_out)))


def redact(lines):
    return "\n".join(re.sub(r"eyJ[A-Za-z0-9_.-]+", "eyJ<redacted>", re.sub(r"rt_[A-Za-z0-9_-]+", "rt_<redacted>", line)) for line in lines)


def main():
    api = blocks("api-with-tokens.md", "console")
    if len(api) != 8:
        fail(f"api-with-tokens.md has {len(api)} console blocks, not 8 (login, websocat, accounts, then the token tour's five): update this test")
    login, websocat, accounts, tour = api[0], api[1], api[2], api[3:]
    if "websocat" not in websocat:
        fail("the second console block of api-with-tokens.md is the websocat one")

    # The first login, against the serve that runs in API_DIR.
    run_session("api-with-tokens.md first login", API_DIR, console_steps(login))

    # The browser snippet, verbatim, in Chromium on the demo page the gateway serves.
    snippet = blocks("api-with-tokens.md", "js")
    if len(snippet) != 1:
        fail("api-with-tokens.md has one js block")
    browser_snippet(snippet[0])

    # Accounts: in the serve's directory, while it runs.
    steps = console_steps(accounts)
    run_session("api-with-tokens.md accounts", API_DIR, steps)
    bob = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "localhost:8080/api/auth/login",
                          "-H", "Content-Type: application/json",
                          "-d", json.dumps({"username": "bob", "password": PASSWORD, "tenant": "acme"})],
                         capture_output=True, text=True).stdout
    if bob != "200":
        fail(f"bob, enabled again, logs in with tenant acme: {bob}")
    ok("after `users enable`, bob logs in with \"tenant\":\"acme\"")

    # The token tour, in a fresh directory, its five blocks in one session, in the guide's order.
    os.makedirs(TOUR_DIR)
    steps = [step for block in tour for step in console_steps(block)]
    run_session("api-with-tokens.md token tour", TOUR_DIR, steps)

    # keys.md's rotation, on the running gateway's own key directory.
    old = json.load(urllib.request.urlopen("http://127.0.0.1:8080/.well-known/jwks.json"))["keys"]
    listing = subprocess.run([os.path.join(WORK, "bin", "portcullis"), "keys", "list"], cwd=API_DIR, capture_output=True, text=True).stdout
    active = [line.split()[0] for line in listing.splitlines() if " active " in line]
    if len(active) != 1:
        fail(f"serve's key directory has one active key: {listing}")
    (rotation,) = blocks("keys.md", "sh")
    reloads_before = reloads()
    SUBSTITUTIONS["OLD-KID"] = lambda command: command.replace("OLD-KID", active[0])
    run_session("keys.md rotation", API_DIR, [(line, []) for line in rotation.splitlines() if line.strip() and not line.startswith("#")])
    listing = subprocess.run([os.path.join(WORK, "bin", "portcullis"), "keys", "list"], cwd=API_DIR, capture_output=True, text=True).stdout
    if not re.search(re.escape(active[0]) + r"\s+ES256\s+retired", listing) or len([l for l in listing.splitlines() if " active " in l]) != 1:
        fail(f"after keys.md's commands the old key is retired and another active: {listing}")
    # The gateway watches its key directory ("action=key ring changed" in its log, naming each key's
    # state); logins are rate limited, so it logs in only once a reload without the old key active was
    # seen, and at most three times. Its 5-second poll may read the directory between two of the
    # guide's commands (CI saw it reload the old key alone, then the test log in before the next
    # poll): waited for over three polls.
    def old_key_replaced():
        changes = [line for line in open(os.path.join(WORK, "serve.log")).read().splitlines() if "key ring changed" in line]
        return len(changes) > reloads_before and f"{active[0]}=active" not in changes[-1]
    for _ in range(160):
        if old_key_replaced():
            break
        time.sleep(0.1)
    for _ in range(3):
        time.sleep(1)
        header = json.loads(b64decode(post_login()["access_token"].split(".")[0]))
        if header["kid"] != active[0]:
            break
    else:
        fail("the running gateway signs with the new key after keys.md's rotation")
    ok(f"keys.md: the running gateway signs with the new key; {len(old)} key(s) published before")

    # reload.md: the check, then SIGHUP to the serve we started. The file it checks is the
    # committed configuration; then one with a misspelt key, which the check refuses, naming it.
    (reload,) = blocks("reload.md", "sh")
    SUBSTITUTIONS["kill -HUP PID"] = lambda command: command.replace("PID", SERVE_PID)
    commands = [line.split("#")[0].strip() for line in reload.splitlines() if line.strip()]
    import shutil
    shutil.copy(os.path.join(ROOT, "config", "portcullis.yaml"), os.path.join(API_DIR, "portcullis.yaml"))
    run_session("reload.md", API_DIR, [(command, []) for command in commands])
    post_login()
    ok("reload.md: serve still answers after the SIGHUP")
    open(os.path.join(API_DIR, "portcullis.yaml"), "w").write("gateway:\n  prot: 8080\n")
    check = subprocess.run([os.path.join(WORK, "bin", "portcullis")] + commands[0].split()[1:], cwd=API_DIR, capture_output=True, text=True)
    if check.returncode != 2 or "did you mean gateway.port?" not in check.stderr:
        fail(f"reload.md: config check refuses a misspelt key, naming it: {check.returncode} {check.stderr}")
    ok("reload.md: config check refuses a misspelt key (prot), naming gateway.port")

    # The next guides use serve's ports (8080, 8081, 9090) themselves: serve stops here.
    os.kill(int(SERVE_PID), 15)
    wait_until_closed(8080)
    tls_guide()
    several_instances_guide()
    browser_app_guide()
    if not os.environ.get("NO_RADICALE"):
        dav_guide()
    mcp_guide()
    agents_guide()


def agents_guide():
    """agents-act-as-their-person.md, as written: Acme Docs (the guide's Authlib service) and a FastMCP
    tool behind a route acting as the person; the MCP SDK's client (Tests/MCP/guide_agents_client.py)
    meets a URL elicitation, alice connects in Chromium from its link, the client hears it is done and
    the tool reads her documents; then the connections commands, and a disable."""
    (commands, leaving) = blocks("agents-act-as-their-person.md", "sh")
    before = noted()
    run_session("agents guide try it", os.path.join(WORK, "home"), [(commands, [])])
    wait_until_ready()
    import socket
    for port in (9100, 9200):
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
    client = subprocess.run([os.environ["MCP_PYTHON"], os.path.join(ROOT, "Tests", "MCP", "guide_agents_client.py")], capture_output=True, text=True, timeout=120)
    expected = ["elicitation: -32042", "page: Acme Docs connected", "notified: yes", "my_documents: alice-docs Quarterly plan, Alice's notes"]
    if client.returncode != 0 or client.stdout.splitlines() != expected:
        fail(f"agents-act-as-their-person.md: the client meets the elicitation, alice connects, the tool reads her documents: {client.stdout[-500:]} {client.stderr[-1500:]}")
    ok("agents-act-as-their-person.md: the MCP SDK's client met a URL elicitation, alice connected Acme Docs in Chromium from its link, "
       "the client was told on its stream, and my_documents read her documents there")
    (listing,) = blocks("agents-act-as-their-person.md", "console")
    run_session("agents guide connections", os.path.join(WORK, "home", "try-agents"), console_steps(listing))
    run_session("agents guide leaving", os.path.join(WORK, "home", "try-agents"), [(leaving, [])])
    stop_started_since(before)


def mcp_guide():
    """mcp.md, as written: FastMCP behind an MCP route, serve; what a client finds from the 401; an
    MCP client (the official SDK's, tests/MCP/guide_client.py) registering, alice signing in and
    allowing it in Chromium, a tool called; then the oauth commands that list the client and grant."""
    (commands,) = blocks("mcp.md", "sh")
    before = noted()
    run_session("mcp.md try it", os.path.join(WORK, "home"), [(commands, [])])
    wait_until_ready()
    for _ in range(100):
        try:
            import socket
            socket.create_connection(("127.0.0.1", 9100), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    discovery, listing, leaving = blocks("mcp.md", "console")
    run_session("mcp.md discovery", os.path.join(WORK, "home", "try-mcp"), console_steps(discovery))
    client = subprocess.run([os.environ["MCP_PYTHON"], os.path.join(ROOT, "Tests", "MCP", "guide_client.py")], capture_output=True, text=True, timeout=120)
    if client.returncode != 0 or "add: 42" not in client.stdout:
        fail(f"mcp.md: an MCP client signs alice in and calls add: {client.stdout[-500:]} {client.stderr[-1500:]}")
    ok("mcp.md: the MCP SDK's client, given only the route's URL, registered, alice signed in and allowed it in Chromium, and add answered 42")
    run_session("mcp.md oauth", os.path.join(WORK, "home", "try-mcp"), console_steps(listing))
    # "When someone leaves": alice's grant listed by her username, ended with one command, then enabled again.
    run_session("mcp.md leaving", os.path.join(WORK, "home", "try-mcp"), console_steps(leaving))
    stop_started_since(before)


def wait_until_closed(port):
    import socket
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            time.sleep(0.1)
        except OSError:
            return
    fail(f"port {port} is still open")


def background(command, log, directory, env=None):
    """Starts `command`, noting its PID to stop it at the end (guides-test.sh stops those noted)."""
    process = subprocess.Popen(command, cwd=directory, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
    with open(os.environ["BACKGROUND_PIDS"], "a") as pids:
        pids.write(f"{process.pid}\n")
    return process


def tls_guide():
    """tls.md's configuration, as written but for the certificate's folder: serve answers https
    with that certificate on 8443 and names public_url as its issuer; a key others may read stops it."""
    (config,) = blocks("tls.md", "yaml")
    directory = os.path.join(WORK, "home", "tls")
    certificates = os.path.join(WORK, "tls")
    os.makedirs(directory)
    os.makedirs(certificates)
    key, chain = os.path.join(certificates, "privkey.pem"), os.path.join(certificates, "fullchain.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
                    "-subj", "/CN=auth.example.com", "-addext", "subjectAltName=DNS:auth.example.com",
                    "-keyout", key, "-out", chain], check=True, capture_output=True)
    open(os.path.join(directory, "portcullis.yaml"), "w").write(config.replace("/etc/portcullis/tls/", certificates + "/"))
    command = [os.path.join(WORK, "bin", "portcullis"), "serve", "--config", "portcullis.yaml"]

    os.chmod(key, 0o644)
    refused = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=60)
    if refused.returncode == 0 or "privkey.pem" not in refused.stdout + refused.stderr:
        fail(f"tls.md: a private key others can read stops serve, naming the file: {refused.returncode} {(refused.stdout + refused.stderr)[-400:]}")
    ok("tls.md: a private key others can read stops serve, naming the file")

    os.chmod(key, 0o600)
    log = os.path.join(WORK, "tls.log")
    serve = background(command, log, directory)
    curl = ["curl", "-s", "--cacert", chain, "--resolve", "auth.example.com:8443:127.0.0.1"]
    for _ in range(150):
        if subprocess.run(curl + ["-f", "-o", "/dev/null", "https://auth.example.com:8443/readyz"]).returncode == 0:
            break
        time.sleep(0.2)
    else:
        fail(f"tls.md: serve with the guide's configuration answers https on 8443: {open(log).read()[-600:]}")
    discovery = json.loads(subprocess.run(curl + ["https://auth.example.com:8443/.well-known/oauth-authorization-server"],
                                          capture_output=True, text=True).stdout)
    if discovery.get("issuer") != "https://auth.example.com:8443":
        fail(f"tls.md: the issuer follows public_url: {discovery.get('issuer')}")
    serve.terminate()
    serve.wait(timeout=30)
    ok("tls.md: serve with the guide's configuration answers https on 8443 with that certificate; its issuer is public_url")


def several_instances_guide():
    """several-instances.md's commands as written, on a PostgreSQL cluster of this run's own:
    then alice logs in through the gateway, whose token names the guide's issuer, and the
    database holds her session."""
    if os.environ.get("NO_POSTGRES"):
        print("skip  several-instances.md: PostgreSQL is missing (apt-get install postgresql)")
        return
    (block,) = blocks("several-instances.md", "console")
    directory = os.path.join(WORK, "home", "instances")
    os.makedirs(directory)
    environment = {"DB_PASSWORD": "role password " + str(os.getpid()), "PGUSER": "postgres"}
    try:
        run_session("several-instances.md", directory, console_steps(block), environment)
        for _ in range(150):
            try:
                urllib.request.urlopen("http://127.0.0.1:8080/readyz", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        else:
            fail("several-instances.md: the gateway becomes ready")
        header, claims = (json.loads(b64decode(part)) for part in post_login("acme")["access_token"].split(".")[:2])
        if claims.get("iss") != "https://auth.example.com":
            fail(f"several-instances.md: the token names the guide's issuer: {claims.get('iss')}")
        sessions = subprocess.run(["psql", "-d", "portcullis", "-tAc", "SELECT count(*) FROM sessions"],
                                  capture_output=True, text=True, env=dict(os.environ, **environment))
        if sessions.returncode != 0 or int(sessions.stdout.strip() or 0) < 1:
            fail(f"several-instances.md: the login's session is in PostgreSQL: {sessions.stdout} {sessions.stderr}")
        ok("several-instances.md: alice logs in through the gateway on PostgreSQL; the token names the guide's issuer and the session is in the database")
    finally:
        stop_background()


def stop_background():
    for line in open(os.environ["BACKGROUND_PIDS"]).read().split():
        try:
            os.kill(int(line), 15)
        except (ProcessLookupError, ValueError):
            pass


def reloads():
    return open(os.path.join(WORK, "serve.log")).read().count("key ring changed")


def b64decode(part):
    import base64
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def post_login(tenant=None):
    body = {"username": "alice", "password": PASSWORD} | ({"tenant": tenant} if tenant else {})
    request = urllib.request.Request("http://127.0.0.1:8080/api/auth/login", method="POST",
                                     data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request))


def stop_started_since(count):
    """Stops the background processes noted after the first `count` (a guide's own), then waits for serve's port."""
    pids = open(os.environ["BACKGROUND_PIDS"]).read().split()
    for pid in pids[count:]:
        try:
            os.kill(int(pid), 15)
        except (ProcessLookupError, ValueError):
            pass
    wait_until_closed(8080)


def noted():
    return len(open(os.environ["BACKGROUND_PIDS"]).read().split())


def dav_guide():
    """browser-app.md's WebDAV section, as written: Radicale behind a route listing WebDAV's and
    CalDAV's methods, alice's calendar made with MKCALENDAR, listed with PROPFIND, refused without a token."""
    (_, commands) = blocks("browser-app.md", "sh")
    before = noted()
    run_session("browser-app.md WebDAV", os.path.join(WORK, "home"), [(commands, [])])
    wait_until_ready()
    (session,) = blocks("browser-app.md", "console")
    run_session("browser-app.md WebDAV", os.path.join(WORK, "home", "try-dav"), console_steps(session))
    stop_started_since(before)


def wait_until_ready():
    for _ in range(150):
        try:
            urllib.request.urlopen("http://127.0.0.1:8080/readyz", timeout=2)
            return
        except Exception:
            time.sleep(0.2)
    fail("a guide's serve did not become ready on 8080")


def browser_app_guide():
    """browser-app.md's first section, as written: the app, the configuration, alice, serve; then
    what it says a browser sees, in Chromium: the account form, signed in as alice, back on /app/
    greeted by name (the gateway's own account form, and the person's name in the app)."""
    (commands, _) = blocks("browser-app.md", "sh")
    before = noted()
    # One bash (`cd` carries over), the heredocs whole: the block is one command.
    run_session("browser-app.md without a provider", os.path.join(WORK, "home"), [(commands, [])])
    wait_until_ready()
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = browser.new_page()
        page.goto("http://127.0.0.1:8080/app/")
        if not page.url.startswith("http://127.0.0.1:8080/.portcullis/sign_in?rd=") or page.locator("#username").count() != 1:
            fail(f"browser-app.md: opening /app/ shows the account form: {page.url}")
        page.fill("#username", "alice")
        page.fill("#password", PASSWORD)
        with page.expect_navigation(url="http://127.0.0.1:8080/app/", timeout=10000):
            page.click("button[type=submit]")
        greeting = page.locator("h1").inner_text()
        browser.close()
    if greeting != "Hello, alice":
        fail(f"browser-app.md: signed in, /app/ says Hello, alice: {greeting!r}")
    ok("browser-app.md: in Chromium, /app/ shows the account form; signed in as alice it is back on /app/, which says Hello, alice")
    stop_started_since(before)


def browser_snippet(snippet):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ["CHROMIUM"], args=["--no-sandbox"])
        page = browser.new_page()
        logged, errors = [], []
        page.on("console", lambda message: message.type == "log" and logged.append(message.args[0].json_value()))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto("http://127.0.0.1:8080/demo/")
        # The snippet's `password` is the reader's; it is the one thing given around it.
        page.add_script_tag(type="module", content=f"const password = {json.dumps(PASSWORD)};\n{snippet}")
        for _ in range(100):
            if logged or errors:
                break
            page.wait_for_timeout(100)
        browser.close()
    if errors:
        fail(f"the js snippet threw: {errors[0]}")
    if logged != [{"hello": "runtime"}]:
        fail(f"the js snippet logs {{hello: \"runtime\"}}: {logged}")
    ok("api-with-tokens.md js snippet, verbatim in Chromium on the demo page: logs {hello: \"runtime\"}")


main()
