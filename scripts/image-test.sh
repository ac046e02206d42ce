#!/usr/bin/env bash
# The OCI image (scripts/image.sh), read as a registry client reads it and run as a container runs it:
#   - its configuration: user 65532:65532, entrypoint /usr/bin/portcullis, command `serve --config
#     /etc/portcullis/portcullis.yaml`, working directory and volume /var/lib/portcullis, the OCI
#     labels (version and revision those of the package it was built from, source);
#   - no setuid or setgid program in it;
#   - `IMAGE --version` names that version and commit;
#   - with its own command and configuration, a read-only root and an empty volume: it starts as
#     65532, writes its key (0600) and database into the volume only, answers /healthz and /readyz;
#   - with a configuration mounted read-only on /etc/portcullis (as a ConfigMap is): a user added by
#     `IMAGE users add`, a login, a route (a Bearer token needed; the upstream reached with it), and
#     ext_authz's HTTP mode deciding the same;
#   - the keys from a Secret as Kubernetes mounts it (links into ..data, root:65532 0440), copied by
#     kubernetes.md's init container command (the image's shell) to 65532's own 0600 files: its key signs;
#   - SIGTERM (the image's stop signal) stops it within 10 s with status 0.
#
# How it is run: with podman where podman can run containers; else (podman missing, or unable, as in
# a sandbox that refuses setrlimit) the image is unpacked with umoci and run with systemd-nspawn,
# the image's own user, environment, working directory and command read from its configuration,
# the root read-only, the volume bound, no capabilities beyond nspawn's defaults dropped to the
# user's. Either way on the host's loopback (the listeners moved to 127.0.0.1 and this test's ports).
#
#   scripts/image-test.sh [IMAGE]   default: the newest .build/image/portcullis-*-oci.tar
#                                   (scripts/image.sh builds one when there is none)
#
# Needs root, umoci and systemd-nspawn (or a working podman). Without them it says what is missing
# and exits 0, except in CI (CI=true). Ports 18796-18799; every process it starts is stopped by its PID.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
missing=()
[ "$(id -u)" -eq 0 ] || missing+=("root")
command -v umoci >/dev/null || missing+=(umoci)
command -v systemd-nspawn >/dev/null || command -v podman >/dev/null || missing+=(systemd-container)
if [ ${#missing[@]} -gt 0 ]; then
  echo "image-test.sh: needs ${missing[*]}; skipped"
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
IMAGE=${1:-$(ls -t .build/image/portcullis-*-oci.tar 2>/dev/null | head -1 || true)}
if [ -z "$IMAGE" ]; then scripts/image.sh; IMAGE=$(ls -t .build/image/portcullis-*-oci.tar | head -1); fi
IMAGE=$(cd "$(dirname "$IMAGE")" && pwd)/$(basename "$IMAGE")
GATEWAY_PORT=18796 ADMIN_PORT=18797 UPSTREAM_PORT=18798 EXT_AUTHZ_PORT=18799
for port in $GATEWAY_PORT $ADMIN_PORT $UPSTREAM_PORT $EXT_AUTHZ_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "image-test.sh: port $port is taken"; exit 1; fi
done
WORK=$(mktemp -d /tmp/portcullis-image-test.XXXXXX)
CONTAINER_PID= UPSTREAM_PID= PODMAN_NAME=portcullis-image-test-$$ PODMAN_TAG=
cleanup() {
  [ -n "$CONTAINER_PID" ] && { kill -KILL "$CONTAINER_PID" 2>/dev/null || true; wait "$CONTAINER_PID" 2>/dev/null || true; }
  # nspawn killed leaves its container's first process behind: the one with this run's mark.
  for pid in $(pgrep -x portcullis || true); do
    tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "PORTCULLIS_IMAGE_TEST=$$" && kill -KILL "$pid" 2>/dev/null || true
  done
  [ -n "$UPSTREAM_PID" ] && kill "$UPSTREAM_PID" 2>/dev/null || true
  [ -n "$PODMAN_TAG" ] && { podman rm -f "$PODMAN_NAME" >/dev/null 2>&1 || true; podman rmi -f "$PODMAN_TAG" >/dev/null 2>&1 || true; }
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL  $*"; exit 1; }
ok() { echo "ok    $*"; }

# The image as a registry client reads it: index -> manifest -> configuration.
mkdir -p "$WORK/layout"
tar -C "$WORK/layout" -xf "$IMAGE"
python3 - "$WORK/layout" > "$WORK/image.env" <<'READ'
import json, os, shlex, sys
layout = sys.argv[1]
def blob(digest):
    algorithm, value = digest.split(":")
    return json.load(open(os.path.join(layout, "blobs", algorithm, value)))
index = json.load(open(os.path.join(layout, "index.json")))
manifests = index["manifests"]
assert len(manifests) == 1, f"one image in the layout, not {len(manifests)}"
tag = manifests[0]["annotations"]["org.opencontainers.image.ref.name"]
config = blob(blob(manifests[0]["digest"])["config"]["digest"])
c = config["config"]
labels = c.get("Labels", {})
values = {
    "TAG": tag, "USER": c.get("User", ""), "WORKDIR": c.get("WorkingDir", ""),
    "ENTRYPOINT": " ".join(c.get("Entrypoint", [])), "CMD": " ".join(c.get("Cmd", [])),
    "VOLUMES": " ".join(sorted(c.get("Volumes", {}))), "STOPSIGNAL": c.get("StopSignal", ""),
    "ENV": " ".join(c.get("Env", [])),
    "LABEL_VERSION": labels.get("org.opencontainers.image.version", ""),
    "LABEL_REVISION": labels.get("org.opencontainers.image.revision", ""),
    "LABEL_SOURCE": labels.get("org.opencontainers.image.source", ""),
    "OS": config.get("os", ""), "ARCH": config.get("architecture", ""),
}
for key, value in values.items():
    print(f"IMAGE_{key}={shlex.quote(value)}")
READ
# shellcheck disable=SC1091
source "$WORK/image.env"
[ "$IMAGE_OS/$IMAGE_ARCH" = linux/amd64 ] || fail "the image is linux/amd64: $IMAGE_OS/$IMAGE_ARCH"
[ "$IMAGE_USER" = 65532:65532 ] || fail "the image runs as 65532:65532, not root: '$IMAGE_USER'"
[ "$IMAGE_ENTRYPOINT" = /usr/bin/portcullis ] || fail "the entrypoint is /usr/bin/portcullis: '$IMAGE_ENTRYPOINT'"
[ "$IMAGE_CMD" = "serve --config /etc/portcullis/portcullis.yaml" ] || fail "the command is serve with the packaged configuration: '$IMAGE_CMD'"
[ "$IMAGE_WORKDIR" = /var/lib/portcullis ] && [ "$IMAGE_VOLUMES" = /var/lib/portcullis ] || fail "works in, and has its volume at, /var/lib/portcullis: '$IMAGE_WORKDIR' '$IMAGE_VOLUMES'"
[ "$IMAGE_STOPSIGNAL" = SIGTERM ] || fail "the stop signal is SIGTERM: '$IMAGE_STOPSIGNAL'"
[ -n "$IMAGE_LABEL_VERSION" ] && [ "$IMAGE_LABEL_VERSION" = "$IMAGE_TAG" ] || fail "the version label is the tag: '$IMAGE_LABEL_VERSION' '$IMAGE_TAG'"
[[ "$IMAGE_LABEL_REVISION" =~ ^[0-9a-f]{7,}(-dirty)?(\+debug)?$ ]] || fail "the revision label is a commit: '$IMAGE_LABEL_REVISION'"
[ -n "$IMAGE_LABEL_SOURCE" ] || fail "the source label is set"
ok "the image's configuration: user 65532:65532, $IMAGE_ENTRYPOINT $IMAGE_CMD, volume $IMAGE_VOLUMES, labels version $IMAGE_LABEL_VERSION, revision $IMAGE_LABEL_REVISION, source"

# The runner: podman when it can run this image, else the image unpacked under systemd-nspawn.
umoci unpack --image "$WORK/layout:$IMAGE_TAG" "$WORK/bundle" > /dev/null
privileged=$(cd "$WORK/bundle/rootfs" && find . -xdev -type f -perm /6000 | head -5)
[ -z "$privileged" ] || fail "the image has no setuid or setgid program: $privileged"
RUNNER=nspawn
if command -v podman >/dev/null; then
  PODMAN_TAG=localhost/portcullis-image-test:$$
  if podman pull -q "oci-archive:$IMAGE" > "$WORK/podman.log" 2>&1 && podman tag "$(tail -1 "$WORK/podman.log")" "$PODMAN_TAG" >> "$WORK/podman.log" 2>&1 &&
    podman run --rm --read-only --network host "$PODMAN_TAG" --version >> "$WORK/podman.log" 2>&1; then
    RUNNER=podman
  else
    echo "      podman cannot run the image here ($(grep -m1 -i 'error' "$WORK/podman.log" || tail -1 "$WORK/podman.log")); running it under systemd-nspawn"
  fi
fi
[ "$RUNNER" = podman ] || command -v systemd-nspawn >/dev/null || fail "neither podman nor systemd-nspawn can run the image"
# The image's environment, as nspawn --setenv arguments.
nspawn_env=()
for assignment in $IMAGE_ENV; do nspawn_env+=("--setenv=$assignment"); done
# run_image VOLUME CONFIG_DIR|- ENV... -- ARGS...: the image in the foreground (its arguments after
# the entrypoint; none: its command), its root read-only, VOLUME on /var/lib/portcullis, CONFIG_DIR
# read-only on /etc/portcullis, SECRET_MOUNT (when set) read-only on /run/portcullis-keys, ENV
# (NAME=VALUE) added to its environment, RUN_ENTRYPOINT (when set) in place of the image's
# entrypoint. It execs the runner:
# call it in a subshell (`$(...)`, `(...)` or `&`), whose PID is then the runner's.
run_image() {
  local volume=$1 config=$2 env=() args=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  if [ "$RUNNER" = podman ]; then
    local options=(--rm -i --name "$PODMAN_NAME" --read-only --network host --stop-signal SIGTERM -v "$volume:/var/lib/portcullis")
    [ "$config" != - ] && options+=(-v "$config:/etc/portcullis:ro")
    [ -n "${SECRET_MOUNT:-}" ] && options+=(-v "$SECRET_MOUNT:/run/portcullis-keys:ro")
    [ -n "${RUN_ENTRYPOINT:-}" ] && options+=(--entrypoint "$RUN_ENTRYPOINT")
    for assignment in "${env[@]}"; do options+=(-e "$assignment"); done
    exec podman run "${options[@]}" "$PODMAN_TAG" "${args[@]}"
  else
    local options=(-D "$WORK/bundle/rootfs" --read-only --register=no --keep-unit --resolv-conf=off --timezone=off
      --console=pipe --kill-signal=SIGTERM --setenv=NOTIFY_SOCKET= --setenv=PORTCULLIS_IMAGE_TEST=$$ --user="${IMAGE_USER%%:*}" --chdir="$IMAGE_WORKDIR" --bind="$volume:/var/lib/portcullis")
    [ "$config" != - ] && options+=(--bind-ro="$config:/etc/portcullis")
    [ -n "${SECRET_MOUNT:-}" ] && options+=(--bind-ro="$SECRET_MOUNT:/run/portcullis-keys")
    for assignment in "${env[@]}"; do options+=("--setenv=$assignment"); done
    [ ${#args[@]} -gt 0 ] || read -r -a args <<< "$IMAGE_CMD"
    # The image's environment first, the test's after it (the later --setenv wins, as podman's -e does).
    exec systemd-nspawn "${nspawn_env[@]}" "${options[@]}" "${RUN_ENTRYPOINT:-$IMAGE_ENTRYPOINT}" "${args[@]}"
  fi
}
# stop_image: SIGTERM, as a container runtime stops it; STOPPED is its exit status, or "timeout" after 10 s.
stop_image() {
  if [ "$RUNNER" = podman ]; then podman kill --signal SIGTERM "$PODMAN_NAME" >/dev/null 2>&1 || true; else kill -TERM "$CONTAINER_PID"; fi
  for _ in $(seq 100); do kill -0 "$CONTAINER_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$CONTAINER_PID" 2>/dev/null; then STOPPED=timeout; return; fi
  STOPPED=0
  wait "$CONTAINER_PID" || STOPPED=$?
  CONTAINER_PID=
}
# alice's access token from a login through the running container (empty when refused).
login_alice() {
  curl -s -X POST "http://127.0.0.1:$GATEWAY_PORT/api/auth/login" -H 'Content-Type: application/json' \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"username": "alice", "password": sys.argv[1]}))' "$PASSWORD")" |
    python3 -c 'import json,sys; print(json.load(sys.stdin).get("access_token", ""))'
}
new_volume() { mkdir -p "$WORK/$1"; chown 65532:65532 "$WORK/$1"; chmod 0750 "$WORK/$1"; echo "$WORK/$1"; }
wait_healthy() {
  for _ in $(seq 150); do curl -sf -o /dev/null "http://127.0.0.1:$GATEWAY_PORT/healthz" && return 0; kill -0 "$CONTAINER_PID" 2>/dev/null || return 1; sleep 0.2; done
  return 1
}
# The test's listeners on loopback (the image's 0.0.0.0 is for a pod's own address).
ports=("GATEWAY_PORT=$GATEWAY_PORT" "ADMIN_PORT=$ADMIN_PORT" RUNTIME_PORT=0 GATEWAY_HOST=127.0.0.1 ADMIN_HOST=127.0.0.1 EXT_AUTHZ_HOST=127.0.0.1)

version=$(run_image "$(new_volume version)" - -- --version 2>/dev/null < /dev/null)
[ "$version" = "portcullis $IMAGE_LABEL_VERSION (commit $IMAGE_LABEL_REVISION)" ] || fail "IMAGE --version names the labels' version and commit: '$version'"
ok "($RUNNER) IMAGE --version: $version"

# Its own command and configuration, read-only root, empty volume.
VOLUME=$(new_volume data)
run_image "$VOLUME" - "${ports[@]}" < /dev/null > "$WORK/serve.log" 2>&1 & CONTAINER_PID=$!
wait_healthy || { tail -20 "$WORK/serve.log"; fail "the image's own command answers /healthz"; }
[ "$(curl -s "http://127.0.0.1:$GATEWAY_PORT/healthz")" = '{"status":"ok"}' ] || fail "/healthz is ok"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY_PORT/readyz")" = 200 ] || fail "/readyz is 200 on the gateway's port"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/readyz")" = 200 ] || fail "/readyz is 200 on the admin port"
key=$(ls "$VOLUME"/keys/*.pem 2>/dev/null | head -1)
[ -n "$key" ] && [ "$(stat -c '%u:%g %a' "$key")" = "65532:65532 600" ] || fail "the key is generated into the volume, 65532's, 0600: $(ls -ln "$VOLUME"/keys 2>&1)"
[ -f "$VOLUME/data/portcullis.sqlite" ] || fail "the database is in the volume's data/"
if [ "$RUNNER" = nspawn ]; then
  # The serving process: a portcullis descended from the nspawn this test started.
  serving_uid=
  for pid in $(pgrep -x portcullis || true); do
    ancestor=$pid
    while [ "$ancestor" -gt 1 ] && [ "$ancestor" != "$CONTAINER_PID" ]; do ancestor=$(awk '{print $4}' "/proc/$ancestor/stat" 2>/dev/null || echo 1); done
    [ "$ancestor" = "$CONTAINER_PID" ] && serving_uid=$(stat -c %u "/proc/$pid")
  done
  [ "$serving_uid" = 65532 ] || fail "serve runs as 65532: '$serving_uid'"
fi
stop_image
[ "$STOPPED" = 0 ] || { tail -20 "$WORK/serve.log"; fail "SIGTERM stops it within 10 s with status 0: $STOPPED"; }
ok "($RUNNER) its own command: a read-only root, /healthz and /readyz, its key (0600) and database in the volume only; SIGTERM stops it (status 0)"

# A configuration mounted read-only (a ConfigMap), a user, a login and a route.
mkdir -p "$WORK/upstream/app" "$WORK/config"
echo "behind the gateway" > "$WORK/upstream/app/index.html"
python3 -m http.server "$UPSTREAM_PORT" --bind 127.0.0.1 --directory "$WORK/upstream" > "$WORK/upstream.log" 2>&1 & UPSTREAM_PID=$!
cat > "$WORK/config/portcullis.yaml" <<CONFIG
gateway:
  routes:
    - prefix: /app
      upstream: http://127.0.0.1:$UPSTREAM_PORT/app
CONFIG
chmod 0644 "$WORK/config/portcullis.yaml"
VOLUME=$(new_volume routed)
PASSWORD="image test password $$"
(run_image "$VOLUME" "$WORK/config" "${ports[@]}" -- users add alice --tenant default --password-stdin --config /etc/portcullis/portcullis.yaml) <<< "$PASSWORD" > "$WORK/users.log" 2>&1 ||
  { cat "$WORK/users.log"; fail "IMAGE users add, on the volume"; }
run_image "$VOLUME" "$WORK/config" "${ports[@]}" "EXT_AUTHZ_HTTP_PORT=$EXT_AUTHZ_PORT" < /dev/null > "$WORK/serve.log" 2>&1 & CONTAINER_PID=$!
wait_healthy || { tail -20 "$WORK/serve.log"; fail "serve with the mounted configuration answers /healthz"; }
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATEWAY_PORT/app/")" = 401 ] || fail "the route without a token is 401"
TOKEN=$(login_alice)
[ -n "$TOKEN" ] || fail "alice, added with IMAGE users add, logs in"
page=$(curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$GATEWAY_PORT/app/")
[ "$page" = "behind the gateway" ] || fail "the route with alice's token reaches the upstream: '$page'"
# ext_authz's HTTP mode, as Envoy asks it: the original path after /ext-authz.
check() { curl -s -o /dev/null -w '%{http_code}' "$@" "http://127.0.0.1:$EXT_AUTHZ_PORT/ext-authz/app/"; }
[ "$(check -H "Authorization: Bearer $TOKEN")" = 200 ] && [ "$(check)" = 401 ] || fail "ext_authz (HTTP) allows alice's token (200) and denies none (401): $(check -H "Authorization: Bearer $TOKEN") $(check)"
stop_image
[ "$STOPPED" = 0 ] || { tail -20 "$WORK/serve.log"; fail "SIGTERM stops it within 10 s with status 0: $STOPPED"; }
if grep -q "$PASSWORD" "$WORK/serve.log" "$WORK/users.log" || grep -qF "$TOKEN" "$WORK/serve.log"; then fail "the password or the token appears in the container's log"; fi
ok "($RUNNER) a configuration mounted read-only on /etc/portcullis: alice added by IMAGE users add logs in; the route is 401 without a token and reaches the upstream with hers, as ext_authz (HTTP) decides; neither secret in the log"
# The keys as docs/guides/kubernetes.md's Deployment has them: a Secret as Kubernetes mounts one
# (read-only, each file a link into a folder of the kubelet's own, ..data -> ..TIMESTAMP, root's,
# group-readable through the pod's fsGroup), copied by the init container's command (the image's own
# shell; kubernetes-guide-test.py checks the guide runs this same command) into an empty volume's
# keys/, as 65532's, 0600; then the gateway signs with that key.
KEYS_INIT='mkdir -p -m 0700 keys && for file in /run/portcullis-keys/*; do install -m 0600 "$file" keys/; done'
SECRET=$WORK/secret
mkdir -p "$SECRET/..2026_11_30_00_00_00.000000000"
cp "$VOLUME"/keys/keyring.json "$VOLUME"/keys/*.pem "$SECRET/..2026_11_30_00_00_00.000000000/"
ln -s ..2026_11_30_00_00_00.000000000 "$SECRET/..data"
for file in "$SECRET"/..data/*; do ln -s "..data/$(basename "$file")" "$SECRET/$(basename "$file")"; done
chown -R 0:65532 "$SECRET"; chmod 0440 "$SECRET"/..data/*; chmod 0755 "$SECRET" "$SECRET/..2026_11_30_00_00_00.000000000"
kid=$(basename "$(ls "$SECRET"/..data/*.pem | head -1)" .pem)
cp -a "$VOLUME/data" "$WORK/accounts"   # alice's account, for the new volume
VOLUME=$(new_volume from-secret)
cp -a "$WORK/accounts" "$VOLUME/data"
(SECRET_MOUNT=$SECRET RUN_ENTRYPOINT=/bin/sh run_image "$VOLUME" - -- -c "$KEYS_INIT") < /dev/null > "$WORK/init.log" 2>&1 || { cat "$WORK/init.log"; fail "the init container's command copies the Secret's keys"; }
for file in "$VOLUME"/keys/*; do
  [ "$(stat -c '%u:%g %a' "$file")" = "65532:65532 600" ] && [ ! -L "$file" ] || fail "the copied $(basename "$file") is 65532's own file, 0600: $(stat -c '%u:%g %a %F' "$file")"
done
[ "$(ls "$VOLUME/keys")" = "$(ls "$SECRET")" ] || fail "the copy holds the Secret's files and no link of the kubelet's: $(ls -A "$VOLUME/keys")"
run_image "$VOLUME" "$WORK/config" "${ports[@]}" < /dev/null > "$WORK/serve.log" 2>&1 & CONTAINER_PID=$!
wait_healthy || { tail -20 "$WORK/serve.log"; fail "serve with the keys copied from the Secret answers /healthz"; }
TOKEN=$(login_alice)
header=$(printf '%s' "${TOKEN%%.*}" | python3 -c 'import base64,json,sys; s=sys.stdin.read(); print(json.loads(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))["kid"])' 2>/dev/null || true)
[ "$header" = "$kid" ] || { tail -20 "$WORK/serve.log"; fail "the token is signed with the Secret's key ($kid): '$header'"; }
grep -q "readable by other users" "$WORK/serve.log" && fail "the gateway warns of a key others can read"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$GATEWAY_PORT/app/")" = 200 ] || fail "the route with that token reaches the upstream"
stop_image
[ "$STOPPED" = 0 ] || { tail -20 "$WORK/serve.log"; fail "SIGTERM stops it within 10 s with status 0: $STOPPED"; }
ok "($RUNNER) the keys from a Secret as Kubernetes mounts it (links into ..data, root:65532 0440), copied by kubernetes.md's init command to 65532's 0600 files: tokens are signed with its key, the route admits them"
SIZE=$(( $(stat -c %s "$IMAGE") / 1048576 ))
UNPACKED=$(du -sm "$WORK/bundle/rootfs" | cut -f1)
ok "the image: $SIZE MiB as an archive, $UNPACKED MiB unpacked"
