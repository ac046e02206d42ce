"""docs/guides/kubernetes.md's blocks, each checked against the schema of what reads it
(scripts/kubernetes-guide-test.sh starts this; read it there).

- ```yaml kubernetes: every object. Kubernetes' own kinds against Kubernetes' schemas (kubernetes-validate,
  strict: an unknown field is an error). Custom resources against their CRD's openAPIV3Schema when a
  folder of CRD files is given (PORTCULLIS_CRDS), an object's unknown field an error there too (a CRD
  prunes unknown fields silently; the check does not); without it, their metadata only, and it says so.
  The ConfigMap's portcullis.yaml: `portcullis config check` must find it good.
- ```yaml envoy-bootstrap: read into Envoy's Bootstrap message (xds-protos), unknown fields an error.
- ```yaml envoy-clusters: read the same way, as the Bootstrap's static_resources.
- GATEWAY.md's ```yaml envoy fragment (the http_filters list): read into HttpConnectionManager the same way.
"""
import copy
import glob
import os
import re
import subprocess
import sys
import tempfile

import jsonschema
import kubernetes_validate
import yaml
from google.protobuf import json_format

# The messages an Any in the guide's Envoy configuration names: imported so the pool knows them.
from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import http_connection_manager_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2  # noqa: F401
from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2  # noqa: F401
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KUBERNETES = "1.34.0"
BIN = os.environ["PORTCULLIS_BIN"]
failures = 0


def fail(message):
    global failures
    failures += 1
    print(f"FAIL  {message}")


def ok(message):
    print(f"ok    {message}")


def blocks(document, language):
    text = open(os.path.join(ROOT, document)).read()
    return re.findall(r"^```yaml " + re.escape(language) + r"\n(.*?)^```$", text, re.S | re.M)


def strict(schema):
    """The schema with every object that names its properties closed to others (as kubectl's
    --validate=strict reads a CRD), except where the CRD keeps unknown fields itself."""
    schema = copy.deepcopy(schema)

    def close(node):
        if isinstance(node, dict):
            if (node.get("type") == "object" and "properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)
    close(schema)
    return schema


def crd_schemas(folder):
    """(group, version, kind) -> openAPIV3Schema, from every CRD in the folder's YAML files."""
    schemas = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.yaml")) + glob.glob(os.path.join(folder, "*.yml"))):
        for document in yaml.safe_load_all(open(path)):
            if not document or document.get("kind") != "CustomResourceDefinition":
                continue
            spec = document["spec"]
            for version in spec["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema")
                if schema:
                    schemas[(spec["group"], version["name"], spec["names"]["kind"])] = schema
    return schemas


def check_custom_resource(name, obj, schemas):
    group, _, version = obj["apiVersion"].rpartition("/")
    # Its metadata as Kubernetes reads any object's (a ConfigMap's ObjectMeta, strictly).
    try:
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj.get("metadata", {})}, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as error:
        fail(f"{name}: its metadata: {error.message}")
        return
    schema = schemas.get((group, version, obj["kind"]))
    if schema is None:
        where = "no CRD folder given (PORTCULLIS_CRDS)" if not os.environ.get("PORTCULLIS_CRDS") else "no CRD for it in PORTCULLIS_CRDS"
        ok(f"{name}: a custom resource; its metadata checked, its spec not ({where})")
        return
    # apiVersion, kind and metadata are every object's, which Kubernetes checks itself (some CRDs
    # leave them out of their schema).
    implicit = ("apiVersion", "kind", "metadata")
    body = {key: value for key, value in obj.items() if key not in implicit}
    closed = strict(schema)
    for key in implicit:
        closed.get("properties", {}).pop(key, None)
    errors = sorted(jsonschema.Draft7Validator(closed).iter_errors(body), key=lambda e: list(e.path))
    if errors:
        for error in errors:
            fail(f"{name}: {'.'.join(str(p) for p in error.path)}: {error.message}")
    else:
        ok(f"{name}: valid against its CRD ({group}/{version})")


def check_portcullis_configuration(name, configuration):
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "portcullis.yaml")
        open(path, "w").write(configuration)
        # As in the pod: the database's URL from the Secret's environment (a stand-in address; config
        # check reads it, and connects to nothing).
        environment = dict(os.environ, STORAGE_POSTGRES_URL="postgres://portcullis:secret@postgres.portcullis.svc:5432/portcullis")
        result = subprocess.run([BIN, "config", "check", "--config", path], cwd=directory, env=environment,
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0 or not result.stdout.startswith("configuration good"):
            fail(f"{name}: portcullis config check: {result.stdout}{result.stderr}")
        else:
            ok(f"{name}: portcullis.yaml is good (portcullis config check, as the pod's environment gives it)")


def check_keys_init(name, deployment):
    """The init container copying the Secret's keys runs the command scripts/image-test.sh runs in the
    image (KEYS_INIT there), from the Secret's mount to the volume the gateway reads keys/ in."""
    spec = deployment["spec"]["template"]["spec"]
    tested = re.search(r"^KEYS_INIT='(.*)'$", open(os.path.join(ROOT, "scripts", "image-test.sh")).read(), re.M)
    inits = spec.get("initContainers", [])
    if not tested or len(inits) != 1 or inits[0].get("command", [])[:2] != ["/bin/sh", "-c"]:
        fail(f"{name}: one init container, /bin/sh -c, and image-test.sh's KEYS_INIT")
        return
    mounts = {m["mountPath"]: m["name"] for m in inits[0].get("volumeMounts", [])}
    secret_volumes = {v["name"] for v in spec["volumes"] if "secret" in v}
    if inits[0]["command"][2] != tested.group(1):
        fail(f"{name}: the init container's command is not the one image-test.sh runs in the image:\n  {inits[0]['command'][2]}\n  {tested.group(1)}")
    elif mounts.get("/run/portcullis-keys") not in secret_volumes or mounts.get("/var/lib/portcullis") != "state":
        fail(f"{name}: the init container reads the Secret at /run/portcullis-keys and writes the state volume: {mounts}")
    elif any(m["mountPath"].startswith("/var/lib/portcullis/keys") for c in spec["containers"] for m in c.get("volumeMounts", [])):
        fail(f"{name}: the gateway's keys/ is the copy, not the Secret mounted over it")
    else:
        ok(f"{name}: its init container runs the command image-test.sh runs in the image (the Secret's keys copied, 0600, 65532's)")


def main():
    schemas = crd_schemas(os.environ["PORTCULLIS_CRDS"]) if os.environ.get("PORTCULLIS_CRDS") else {}
    objects = [obj for block in blocks("docs/guides/kubernetes.md", "kubernetes") for obj in yaml.safe_load_all(block) if obj]
    if len(objects) < 10:
        fail(f"kubernetes.md has {len(objects)} Kubernetes objects; its manifests have more")
    for obj in objects:
        name = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        group = obj.get("apiVersion", "").rpartition("/")[0]
        if group in ("", "apps", "batch", "policy", "networking.k8s.io", "autoscaling", "rbac.authorization.k8s.io"):
            try:
                kubernetes_validate.validate(obj, KUBERNETES, strict=True)
                ok(f"{name}: valid against Kubernetes {KUBERNETES} (strict)")
            except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as error:
                fail(f"{name}: {getattr(error, 'message', error)}")
        else:
            check_custom_resource(name, obj, schemas)
        if obj.get("kind") == "ConfigMap" and "portcullis.yaml" in obj.get("data", {}):
            check_portcullis_configuration(name, obj["data"]["portcullis.yaml"])
        if obj.get("kind") == "Deployment":
            check_keys_init(name, obj)
    bootstraps = blocks("docs/guides/kubernetes.md", "envoy-bootstrap")
    if not bootstraps:
        fail("kubernetes.md has no Envoy configuration")
    for block in bootstraps:
        try:
            json_format.ParseDict(yaml.safe_load(block), bootstrap_pb2.Bootstrap())
            ok("kubernetes.md's Envoy configuration reads as Envoy's Bootstrap (envoy.config.bootstrap.v3, every typed_config too)")
        except json_format.ParseError as error:
            fail(f"kubernetes.md's Envoy configuration: {error}")
    clusters = blocks("docs/guides/kubernetes.md", "envoy-clusters")
    if not clusters:
        fail("kubernetes.md has no Envoy cluster for mutual TLS")
    for block in clusters:
        try:
            json_format.ParseDict({"static_resources": yaml.safe_load(block)}, bootstrap_pb2.Bootstrap())
            ok("kubernetes.md's mutual TLS cluster reads as Envoy's clusters (with its UpstreamTlsContext)")
        except json_format.ParseError as error:
            fail(f"kubernetes.md's mutual TLS cluster: {error}")
    for block in blocks("docs/GATEWAY.md", "envoy"):
        try:
            json_format.ParseDict(yaml.safe_load(block), http_connection_manager_pb2.HttpConnectionManager())
            ok("GATEWAY.md's ext_authz filter reads as Envoy's HttpConnectionManager http_filters")
        except json_format.ParseError as error:
            fail(f"GATEWAY.md's Envoy fragment: {error}")
    if failures:
        sys.exit(f"{failures} check(s) failed")


if __name__ == "__main__":
    main()
