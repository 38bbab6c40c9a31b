"""Hostile and malformed bodies against the embedded API server: each is refused as kube-apiserver
refuses it (the code, the reason and the message kubectl prints), nothing of it is stored, and the
server goes on serving. The cases are kube-apiserver's own limits and rules: the 3 MiB request body,
go-yaml's alias budget, Go's decoder (types, quantities, nesting), the strict decoder's unknown fields,
ValidateResourceRequirements, and etcd's 1.5 MiB object size."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import Kubectl, http_client
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.bodies import AliasingError, load_yaml

PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
SECRETS = "/api/v1/namespaces/default/secrets"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
CANNOT = 'Pod in version "v1" cannot be handled as a Pod: '


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer(seed=7) as started:
        yield started


@pytest.fixture
def http(server: ApiServer) -> Iterator[httpx2.Client]:
    with http_client(server.url) as client:
        yield client


def pod(name: str, *, resources: Any = None, container: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    spec_container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if resources is not None:
        spec_container["resources"] = resources
    spec_container.update(container or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"containers": [spec_container]},
    }


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def billion_laughs(levels: int) -> bytes:
    """A ConfigMap whose data expands 9**levels times through aliases."""
    lines = ['apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs}\ndata:\n  l0: &l0 ["lol"]\n']
    for level in range(1, levels + 1):
        lines.append(f"  l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]\n")
    return "".join(lines).encode()


EXT = "example.com/foo"
# (path, body, content type, query, code, reason, message part)
REFUSED = [
    pytest.param(
        CONFIGMAPS,
        billion_laughs(5),
        "application/yaml",
        "",
        400,
        "BadRequest",
        "yaml: document contains excessive aliasing",
        id="yaml aliases 9^5",
    ),
    pytest.param(
        PODS,
        pod("big", annotations=None, container={"x-padding": "x" * (11 << 20)}),
        "application/json",
        "",
        413,
        "RequestEntityTooLarge",
        "Request entity too large: limit is 3145728",
        id="11 MB of unknown fields",
    ),
    pytest.param(
        PODS,
        pod("q", resources={"limits": {"cpu": "abc"}}),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + QUANTITY_MSG,
        id="quantity abc",
    ),
    pytest.param(
        PODS,
        pod("q", resources={"limits": {"memory": True}}),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + QUANTITY_MSG,
        id="quantity a boolean",
    ),
    pytest.param(
        PODS,
        pod("q", resources={"limits": {"memory": "1mi"}}),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + "unable to parse quantity's suffix",
        id="quantity suffix mi",
    ),
    pytest.param(
        PODS,
        pod("neg", resources={"limits": {EXT: "-1"}}),
        "application/json",
        "",
        422,
        "Invalid",
        f'spec.containers[0].resources.limits[{EXT}]: Invalid value: "-1": must be greater than or equal to 0',
        id="extended resource -1",
    ),
    pytest.param(
        PODS,
        pod("half", resources={"limits": {EXT: "500m"}}),
        "application/json",
        "",
        422,
        "Invalid",
        f'spec.containers[0].resources.limits[{EXT}]: Invalid value: "500m": must be an integer',
        id="extended resource 500m",
    ),
    pytest.param(
        PODS,
        pod("tiny", resources={"limits": {EXT: "1e-50"}}),
        "application/json",
        "",
        422,
        "Invalid",
        f'spec.containers[0].resources.limits[{EXT}]: Invalid value: "1e-50": must be an integer',
        id="extended resource 1e-50",
    ),
    pytest.param(
        PODS,
        pod("ne", resources={"limits": {EXT: "1"}, "requests": {EXT: "2"}}),
        "application/json",
        "",
        422,
        "Invalid",
        f'spec.containers[0].resources.requests: Invalid value: "2": must be equal to {EXT} limit of 1',
        id="extended requests != limits",
    ),
    pytest.param(
        PODS,
        pod("rq", resources={"requests": {EXT: "1"}}),
        "application/json",
        "",
        422,
        "Invalid",
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        id="extended request without limit",
    ),
    pytest.param(
        PODS,
        pod("cpu", resources={"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}),
        "application/json",
        "",
        422,
        "Invalid",
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
        id="cpu request > limit",
    ),
    pytest.param(
        PODS,
        pod("std", resources={"limits": {"gpu": "1"}}),
        "application/json",
        "",
        422,
        "Invalid",
        'limits[gpu]: Invalid value: "gpu": must be a standard resource for containers',
        id="unprefixed resource",
    ),
    pytest.param(
        PODS,
        pod("ann", annotations=[]),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + "json: cannot unmarshal array into Go struct field ObjectMeta.metadata.annotations of type "
        "map[string]string",
        id="annotations a list",
    ),
    pytest.param(
        PODS,
        pod("lbl", labels={"a": 1}),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string",
        id="label value a number",
    ),
    pytest.param(
        PODS,
        pod("rl", resources=[{"limits": {"cpu": "1"}}]),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + "json: cannot unmarshal array into Go struct field Container.spec.containers.resources of type "
        "v1.ResourceRequirements",
        id="resources a list",
    ),
    pytest.param(
        PODS,
        pod("deep", container={"args": nested(1000)}),
        "application/json",
        "",
        400,
        "BadRequest",
        CANNOT + "json: cannot unmarshal array into Go struct field Container.spec.containers.args of type string",
        id="args nested 1000 deep",
    ),
    pytest.param(
        PODS,
        json.dumps(pod("deeper", container={"x": "@"})).replace('"@"', "[" * 20_000 + "]" * 20_000).encode(),
        "application/json",
        "",
        400,
        "BadRequest",
        "json: exceeded max depth",
        id="JSON nested 20000 deep",
    ),
    pytest.param(
        PODS,
        {**pod("prio"), "spec": {**pod("prio")["spec"], "priority": 1e10}},
        "application/json",
        "",
        400,
        "BadRequest",
        "cannot unmarshal number 10000000000.0 into Go struct field PodSpec.spec.priority of type int32",
        id="int32 out of range",
    ),
    pytest.param(
        PODS,
        pod("c", container={"name": ["c"]}),
        "application/json",
        "",
        400,
        "BadRequest",
        "cannot unmarshal array into Go struct field Container.spec.containers.name of type string",
        id="container name a list",
    ),
    pytest.param(
        PODS,
        pod("strict", container={"bogus": 1}),
        "application/json",
        "fieldValidation=Strict",
        400,
        "BadRequest",
        CANNOT + 'strict decoding error: unknown field "spec.containers[0].bogus"',
        id="unknown field, Strict",
    ),
    pytest.param(
        PODS,
        pod("fv"),
        "application/json",
        "fieldValidation=Loose",
        400,
        "BadRequest",
        "fieldValidation must be one of Ignore, Warn, or Strict",
        id="fieldValidation Loose",
    ),
    pytest.param(
        SECRETS,
        {"metadata": {"name": "s"}, "data": {"k": "not base64!"}},
        "application/json",
        "",
        400,
        "BadRequest",
        "illegal base64 data at input byte 3",
        id="secret data not base64",
    ),
    pytest.param(
        LEASES,
        {"metadata": {"name": "huge"}, "spec": {"holderIdentity": "x" * (2 << 20)}},
        "application/json",
        "",
        500,
        "",
        "etcdserver: request is too large",
        id="object over etcd's 1.5 MiB",
    ),
    pytest.param(
        PODS,
        b'{"metadata": {"name": "x"}, "spec": ',
        "application/json",
        "",
        400,
        "BadRequest",
        "the object provided is unrecognized (must be of type Pod)",
        id="truncated JSON",
    ),
]


def send(http: httpx2.Client, path: str, body: Any, content_type: str, query: str) -> httpx2.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.post(path + (f"?{query}" if query else ""), content=raw, headers={"Content-Type": content_type})


def stored_names(http: httpx2.Client) -> list[str]:
    names = []
    for path in (PODS, CONFIGMAPS, SECRETS, LEASES):
        names += [item["metadata"]["name"] for item in http.get(path).json()["items"]]
    return sorted(names)


@pytest.mark.parametrize(("path", "body", "content_type", "query", "code", "reason", "message"), REFUSED)
def test_a_bad_body_is_refused_as_kube_apiserver_refuses_it(
    http: httpx2.Client, path: str, body: Any, content_type: str, query: str, code: int, reason: str, message: str
) -> None:
    before = stored_names(http)
    response = send(http, path, body, content_type, query)
    status = response.json()
    assert (response.status_code, status["kind"], status["status"], status["code"]) == (code, "Status", "Failure", code)
    assert status.get("reason", "") == reason
    assert message in status["message"]
    # nothing stored, and the server goes on serving
    assert stored_names(http) == before
    fine = send(http, PODS, pod("after-bad-input"), "application/json", "")
    assert fine.status_code == 201
    http.delete(f"{PODS}/after-bad-input?gracePeriodSeconds=0")


ACCEPTED = [
    pytest.param(pod("only-limit", resources={"limits": {EXT: "2"}}), id="extended resource only in limits"),
    pytest.param(pod("equal", resources={"limits": {EXT: "2"}, "requests": {EXT: "2"}}), id="extended equal"),
    pytest.param(pod("numbers", resources={"limits": {"cpu": 1.5, "memory": "1e9"}}), id="quantities as numbers"),
    pytest.param(pod("fraction", resources={"limits": {"cpu": "500m"}, "requests": {"cpu": ".1"}}), id="cpu 500m"),
    pytest.param(pod("nulls", annotations=None, labels=None, container={"resources": None}), id="nulls"),
]


@pytest.mark.parametrize("body", ACCEPTED)
def test_what_kube_apiserver_accepts_is_accepted(http: httpx2.Client, body: dict[str, Any]) -> None:
    response = send(http, PODS, body, "application/json", "fieldValidation=Strict")
    assert response.status_code == 201, response.text
    http.delete(f"{PODS}/{body['metadata']['name']}?gracePeriodSeconds=0")


@pytest.mark.parametrize(
    ("query", "warned"),
    [
        pytest.param("", True, id="default Warn"),
        pytest.param("fieldValidation=Warn", True, id="Warn"),
        pytest.param("fieldValidation=Ignore", False, id="Ignore"),
    ],
)
def test_unknown_fields_are_dropped_with_or_without_a_warning(http: httpx2.Client, query: str, warned: bool) -> None:
    body = pod("unknown", container={"bogus": nested(1000)}, bogusMeta="x")
    body["status"] = {"phase": "Pending", "x": 1}
    response = send(http, PODS, body, "application/json", query)
    assert response.status_code == 201, response.text
    stored = http.get(f"{PODS}/unknown").json()
    assert "bogus" not in stored["spec"]["containers"][0]
    assert "bogusMeta" not in stored["metadata"]
    warnings = response.headers.get_list("Warning")
    if warned:
        assert warnings == [
            '299 - "unknown field \\"metadata.bogusMeta\\""',
            '299 - "unknown field \\"spec.containers[0].bogus\\""',
            '299 - "unknown field \\"status.x\\""',
        ]
    else:
        assert warnings == []
    http.delete(f"{PODS}/unknown?gracePeriodSeconds=0")


def test_a_patch_that_breaks_the_types_is_refused_and_changes_nothing(http: httpx2.Client) -> None:
    assert send(http, PODS, pod("patched"), "application/json", "").status_code == 201
    before = http.get(f"{PODS}/patched").json()
    response = http.patch(
        f"{PODS}/patched",
        content=json.dumps({"metadata": {"annotations": ["a"]}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert response.status_code == 400
    assert "Go struct field ObjectMeta.metadata.annotations" in response.json()["message"]
    assert http.get(f"{PODS}/patched").json() == before
    http.delete(f"{PODS}/patched?gracePeriodSeconds=0")


def test_the_369_byte_alias_bomb_is_refused_before_it_expands() -> None:
    """Nine levels of nine: 9**9 (387 million) strings if expanded; go-yaml's count stops it early."""
    bomb = billion_laughs(9)
    assert len(bomb) < 600
    with pytest.raises(AliasingError, match="yaml: document contains excessive aliasing"):
        load_yaml(bomb)


def test_aliases_within_budget_still_work() -> None:
    text = b"base: &b {cpu: '1'}\nlimits: *b\nrequests: {<<: *b, memory: 1Gi}\nlist: [*b, *b]\n"
    assert load_yaml(text) == {
        "base": {"cpu": "1"},
        "limits": {"cpu": "1"},
        "requests": {"cpu": "1", "memory": "1Gi"},
        "list": [{"cpu": "1"}, {"cpu": "1"}],
    }


def test_kubectl_by_default_gets_strict_decoding_and_resource_rules(kubectl: Kubectl) -> None:
    manifest = json.dumps(pod("k", container={"bogus": 1}))
    result = kubectl("create", "-f", "-", stdin=manifest, check=False)
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "spec.containers[0].bogus"' in result.stderr
    manifest = json.dumps(pod("k", resources={"limits": {EXT: "-1"}}))
    result = kubectl("create", "-f", "-", stdin=manifest, check=False)
    assert result.returncode == 1
    assert 'The Pod "k" is invalid: spec.containers[0].resources.limits[example.com/foo]: Invalid value: "-1"' in (
        result.stderr
    )
