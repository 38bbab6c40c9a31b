"""/openapi/v2 and /openapi/v3 as kube-apiserver serves them (kube-openapi's handlers): the v3
discovery document and its hashed group-version URLs, ETags and caching, v2 as JSON and as gnostic
protobuf, custom kinds from CRDs (built in, and written at run time), and what the real kubectl does
with them: `explain` (v3, and v2 with `--output plaintext-openapiv2`), server-side field validation
and dry run found through the v3 PATCH operations, apply's strategic merge by the v3 patch strategies.
"""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from fixtures.apiserver import KUBECTL_BINARIES, Kubectl
from runtimekit.cluster.apiserver import ApiServer

ROOT = Path(__file__).resolve().parents[2]
PROTOBUF_V2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size: {type: integer, description: How big the widget is.}
"""
BAD_CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\nbogus: 1\n"
GOOD_CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: good}\ndata: {a: b}\n"


def _deployment(*containers: str) -> str:
    items = "".join(f"      - {{name: {c}, image: nginx, env: [{{name: A, value: '1'}}]}}\n" for c in containers)
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n"
        "  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n" + items
    )


def _discovery(http: httpx2.Client) -> dict[str, str]:
    answer = http.get("/openapi/v3")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("application/json")
    return {key: entry["serverRelativeURL"] for key, entry in answer.json()["paths"].items()}


def _patch_parameters(document: dict[str, Any], path: str) -> set[str]:
    return {p["name"] for p in document["paths"][path]["patch"]["parameters"] if p["in"] == "query"}


def test_v3_lists_each_group_version_with_a_hash(kube_http: httpx2.Client) -> None:
    urls = _discovery(kube_http)
    for key in ("api/v1", "apis/apps/v1", "apis/batch/v1", "apis/scheduling.volcano.sh/v1beta1"):
        assert urls[key].startswith(f"/openapi/v3/{key}?hash=")
    core = kube_http.get(urls["api/v1"])
    assert core.status_code == 200
    hash_ = urls["api/v1"].rsplit("=", 1)[1]
    assert core.headers["Etag"] == f'"{hash_}"'
    assert core.headers["Cache-Control"] == "public, immutable"
    assert "Expires" in core.headers
    document = core.json()
    assert document["openapi"].startswith("3.")
    pod = document["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    assert "containers" in document["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["required"]
    patch = document["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert {"dryRun", "fieldValidation", "fieldManager", "force"} <= _patch_parameters(
        document, "/api/v1/namespaces/{namespace}/pods/{name}"
    )
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]


def test_v3_caching_as_kube_openapi(kube_http: httpx2.Client) -> None:
    url = _discovery(kube_http)["apis/apps/v1"]
    path, hash_ = url.split("?hash=")
    plain = kube_http.get(path)
    assert plain.status_code == 200
    assert plain.headers["Etag"] == f'"{hash_}"'
    assert "Cache-Control" not in plain.headers  # immutable only at the hashed URL
    assert kube_http.get(path, headers={"If-None-Match": f'"{hash_}"'}).status_code == 304
    moved = kube_http.get(f"{path}?hash=0123", follow_redirects=False)
    assert moved.status_code == 301
    assert moved.headers["Location"] == url
    assert kube_http.get("/openapi/v3/apis/nope/v1").status_code == 404
    assert kube_http.get(path, headers={"Accept": "text/html"}).status_code == 406


def test_v2_as_json_and_protobuf(kube_http: httpx2.Client) -> None:
    as_json = kube_http.get("/openapi/v2", headers={"Accept": "application/json"})
    assert as_json.status_code == 200
    document = as_json.json()
    assert document["swagger"] == "2.0"
    deployment = document["definitions"]["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert deployment["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    assert document["definitions"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"
    patch = document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert "application/strategic-merge-patch+json" in patch["consumes"]
    proto = kube_http.get("/openapi/v2", headers={"Accept": PROTOBUF_V2})
    assert proto.status_code == 200
    assert proto.headers["Content-Type"] == "application/octet-stream"
    assert proto.content.startswith(b"\x0a\x032.0")  # field 1 (swagger), "2.0"
    assert proto.headers["Etag"] != as_json.headers["Etag"]
    assert (
        kube_http.get(
            "/openapi/v2", headers={"If-None-Match": proto.headers["Etag"], "Accept": PROTOBUF_V2}
        ).status_code
        == 304
    )
    assert kube_http.get("/openapi/v2", headers={"Accept": "text/html"}).status_code == 406


def test_a_crd_written_at_run_time_is_published_and_withdrawn(apiserver: ApiServer, kube_http: httpx2.Client) -> None:
    before = _discovery(kube_http)
    assert "apis/example.com/v1" not in before
    created = kube_http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=yaml.safe_load(WIDGET_CRD))
    assert created.status_code == 201
    after = _discovery(kube_http)
    document = kube_http.get(after["apis/example.com/v1"]).json()
    widget = document["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [{"group": "example.com", "kind": "Widget", "version": "v1"}]
    assert widget["properties"]["spec"]["properties"]["size"]["type"] == "integer"
    assert widget["properties"]["metadata"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    }
    assert "fieldValidation" in _patch_parameters(
        document, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"
    )
    assert after["api/v1"] == before["api/v1"]  # other group-versions keep their hash (and clients' caches)
    assert (
        kube_http.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com").status_code
        == 200
    )
    assert "apis/example.com/v1" not in _discovery(kube_http)


def test_the_published_documents_are_built_once_per_table_state(apiserver: ApiServer) -> None:
    first = apiserver.openapi.published()
    assert apiserver.openapi.published() is first


@pytest.mark.slow  # reads kubernetes-validate's definitions of nine releases
def test_the_shipped_documentation_is_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("gen_k8s_schemas", ROOT / "scripts" / "gen_k8s_schemas.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "src" / "runtimekit" / "data" / "k8s-openapi-docs.json.gz").read_bytes() == module.build_docs()


# the real kubectl -------------------------------------------------------------------------------


def test_kubectl_explain(kubectl: Kubectl) -> None:
    spec = kubectl("explain", "pod.spec").stdout
    assert "FIELD: spec <PodSpec>" in spec
    assert "containers\t<[]Container> -required-" in spec
    assert "List of containers belonging to the pod." in spec
    podgroup = kubectl("explain", "podgroups.spec").stdout
    assert "KIND:       PodGroup" in podgroup
    assert "minMember\t<integer>" in podgroup


@pytest.mark.slow
def test_kubectl_explain_recursive_and_from_v2(kubectl: Kubectl) -> None:
    template = kubectl("explain", "deployment.spec.template", "--recursive").stdout
    assert "GROUP:      apps" in template
    assert "restartPolicy\t<string>" in template
    v2 = kubectl("explain", "pod.spec.containers", "--output", "plaintext-openapiv2").stdout
    assert "RESOURCE: containers <[]Object>" in v2
    assert "image\t<string>" in v2


def test_kubectl_validation_and_server_dry_run(kubectl: Kubectl) -> None:
    bad = kubectl("apply", "--validate=strict", "-f", "-", stdin=BAD_CONFIGMAP, check=False)
    assert bad.returncode == 1
    assert 'strict decoding error: unknown field "bogus"' in bad.stderr
    warned = kubectl("apply", "--validate=warn", "-f", "-", stdin=GOOD_CONFIGMAP)
    assert warned.stdout.strip() == "configmap/good created"
    assert warned.stderr == ""  # no klog line about OpenAPI (W... "the server could not find")
    dry = kubectl("create", "--dry-run=server", "-f", "-", stdin=GOOD_CONFIGMAP.replace("good", "dry"))
    assert dry.stdout.strip() == "configmap/dry created (server dry run)"
    assert kubectl("get", "configmap", "dry", check=False).returncode == 1


def _claim_template_list(name: str, exactly: str = "") -> str:
    """A `kind: List` holding a ResourceClaimTemplate: kubectl validates a List's items on the client,
    from /openapi/v2."""
    return (
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaimTemplate\n"
        f"  metadata: {{name: {name}}}\n  spec:\n    spec:\n      devices:\n        requests:\n"
        f"        - name: gpu\n          exactly: {{deviceClassName: gpu.example.com{exactly}}}\n"
    )


def test_resource_k8s_io_kinds_are_described_whatever_version_is_reported(kubectl: Kubectl) -> None:
    """resource.k8s.io v1 is served even where the reported release lacks it: its kinds are published
    with the newest release's definitions, so kubectl's client-side validation of a List and `explain`
    from v2 know their fields (before, the List was refused: unknown field "spec")."""
    made = kubectl("apply", "-f", "-", stdin=_claim_template_list("quarter"))
    assert made.stdout.strip() == "resourceclaimtemplate.resource.k8s.io/quarter created"
    bad = kubectl("apply", "-f", "-", stdin=_claim_template_list("bad", ", bogus: 1"), check=False)
    assert bad.returncode == 1
    assert 'unknown field "bogus" in io.k8s.api.resource.v1.ExactDeviceRequest' in bad.stderr
    explained = kubectl("explain", "resourceclaimtemplate.spec.spec.devices", "--output", "plaintext-openapiv2")
    assert "requests\t<[]Object>" in explained.stdout


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(KUBECTL_BINARIES))
def test_each_kubectl_version(kubectl: Kubectl, version: str) -> None:
    binary = KUBECTL_BINARIES[version]
    assert "containers\t<[]Container> -required-" in kubectl("explain", "pod.spec", binary=binary).stdout
    assert "minMember" in kubectl("explain", "podgroups.spec", binary=binary).stdout
    bad = kubectl("apply", "--validate=strict", "-f", "-", stdin=BAD_CONFIGMAP, binary=binary, check=False)
    assert 'unknown field "bogus"' in bad.stderr
    good = kubectl("apply", "--validate=strict", "-f", "-", stdin=GOOD_CONFIGMAP, binary=binary)
    assert (good.stdout.strip(), good.stderr) == ("configmap/good created", "")
    dry = kubectl("create", "--dry-run=server", "-f", "-", stdin=GOOD_CONFIGMAP.replace("good", "dry"), binary=binary)
    assert dry.stdout.strip() == "configmap/dry created (server dry run)"
    # apply's three-way strategic merge takes the containers' merge key from OpenAPI (v3 or v2 by version)
    kubectl("apply", "-f", "-", stdin=_deployment("a", "b"), binary=binary)
    kubectl("apply", "-f", "-", stdin=_deployment("b"), binary=binary)
    names = kubectl("get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[*].name}", binary=binary)
    assert names.stdout == "b"


# protobuf request bodies --------------------------------------------------------------------------


def test_kubectl_creates_in_protobuf(kubectl: Kubectl) -> None:
    """kubectl 1.32+ sends the objects of `kubectl create|run|expose` as protobuf (and Helm 4 its release
    Secrets), which kube-apiserver takes for every built-in kind."""
    if "1.33" not in KUBECTL_BINARIES:
        pytest.skip("kubectl 1.33 is not installed")
    binary = KUBECTL_BINARIES["1.33"]
    created = kubectl("create", "secret", "generic", "s", "--from-literal=user=admin", "--type=Opaque", binary=binary)
    assert created.stdout.strip() == "secret/s created"
    secret = json.loads(kubectl("get", "secret", "s", "-o", "json").stdout)
    assert (secret["type"], secret["data"]) == ("Opaque", {"user": base64.b64encode(b"admin").decode()})
    kubectl("create", "deployment", "web", "--image=nginx", "--replicas=0", binary=binary)
    spec = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)["spec"]
    assert spec["replicas"] == 0  # a zero the client set is kept
    assert spec["template"]["spec"]["containers"][0]["image"] == "nginx"
    kubectl("run", "p", "--image=busybox", "--env=A=1", "--labels=app=p", "--restart=Never", binary=binary)
    pod = json.loads(kubectl("get", "pod", "p", "-o", "json").stdout)
    assert (pod["metadata"]["labels"], pod["spec"]["containers"][0]["env"]) == (
        {"app": "p"},
        [{"name": "A", "value": "1"}],
    )
    assert pod["spec"]["restartPolicy"] == "Never"
    kubectl("create", "pdb", "half", "--selector=app=p", "--min-available=50%", binary=binary)
    assert kubectl("get", "pdb", "half", "-o", "jsonpath={.spec.minAvailable}").stdout == "50%"  # an IntOrString
    kubectl("delete", "secret", "s", binary=binary)
