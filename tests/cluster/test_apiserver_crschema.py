"""Custom resources are checked against their CRD's structural schema, worded as kube-apiserver's
apiextensions validation words it: Volcano's PodGroup and Queue by the CRDs the kit ships, any
other kind by the CRD written to the server. Types, minimums and maximums, enums, patterns and
required fields; an update is not refused for a part it leaves as stored (ratcheting)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fixtures.apiserver import http_client
from runtimekit.cluster.apiserver import ApiServer
from runtimekit.cluster.apiserver.crschema import BUNDLED_CRDS

ROOT = Path(__file__).resolve().parents[2]
PODGROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
MERGE = {"Content-Type": "application/merge-patch+json"}
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


@pytest.fixture
def http(apiserver: ApiServer) -> Iterator[httpx2.Client]:
    with http_client(apiserver.url) as client:
        yield client


def test_the_bundled_crds_are_the_ones_the_kit_ships() -> None:
    shipped = sorted((ROOT / "deploy" / "crds").glob("[0-9][0-9]-*.yaml"))
    bundled = [ROOT / "src" / "runtimekit" / "data" / name for name in BUNDLED_CRDS]
    assert [p.read_text() for p in bundled] == [p.read_text() for p in shipped]


@pytest.mark.parametrize(
    ("path", "kind", "spec", "message"),
    [
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"minMember": "abc"},
            'spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string"',
            id="minMember-string",
        ),
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"minMember": 1.5},
            'spec.minMember: Invalid value: "float64": spec.minMember in body must be of type integer: "number"',
            id="minMember-fraction",
        ),
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"minMember": -1},
            "spec.minMember: Invalid value: -1: spec.minMember in body should be greater than or equal to 0",
            id="minMember-negative",
        ),
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"queue": 7},
            'spec.queue: Invalid value: "int64": spec.queue in body must be of type string: "integer"',
            id="queue-number",
        ),
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"minResources": {"cpu": "lots"}},
            f"spec.minResources.cpu: Invalid value: \"lots\": spec.minResources.cpu in body should match '{QUANTITY}'",
            id="quantity-pattern",
        ),
        pytest.param(
            PODGROUPS,
            "PodGroup",
            {"networkTopology": {"mode": "loose"}},
            'spec.networkTopology.mode: Unsupported value: "loose": supported values: "hard", "soft"',
            id="enum",
        ),
        pytest.param(
            QUEUES,
            "Queue",
            {"weight": "heavy"},
            'spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "string"',
            id="weight-string",
        ),
        pytest.param(
            QUEUES,
            "Queue",
            {"weight": 0},
            "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1",
            id="weight-zero",
        ),
        pytest.param(
            QUEUES,
            "Queue",
            {"weight": 70000},
            "spec.weight: Invalid value: 70000: spec.weight in body should be less than or equal to 65535",
            id="weight-too-big",
        ),
        pytest.param(
            QUEUES,
            "Queue",
            {"reclaimable": "yes"},
            'spec.reclaimable: Invalid value: "string": spec.reclaimable in body must be of type boolean: "string"',
            id="boolean",
        ),
    ],
)
def test_volcano_objects_against_the_schema_are_refused_in_kube_apiservers_words(
    http: httpx2.Client, path: str, kind: str, spec: dict[str, Any], message: str
) -> None:
    response = http.post(path, json={"metadata": {"name": "x"}, "spec": spec})
    assert response.status_code == 422, response.text
    status = response.json()
    assert status["reason"] == "Invalid"
    assert status["message"] == f'{kind}.scheduling.volcano.sh "x" is invalid: {message}'
    field, _, _ = message.partition(": ")
    assert [c["field"] for c in status["details"]["causes"]] == [field]
    assert http.get(f"{path}/x").status_code == 404


def test_updates_and_status_writes_are_checked_and_valid_objects_pass(http: httpx2.Client) -> None:
    created = http.post(PODGROUPS, json={"metadata": {"name": "g"}, "spec": {"minMember": 2, "queue": "q"}})
    assert created.status_code == 201, created.text
    patched = http.patch(f"{PODGROUPS}/g", content=json.dumps({"spec": {"minMember": "two"}}), headers=MERGE)
    assert patched.status_code == 422
    assert "spec.minMember in body must be of type integer" in patched.json()["message"]
    status = http.patch(f"{PODGROUPS}/g/status", content=json.dumps({"status": {"running": "all"}}), headers=MERGE)
    assert status.status_code == 422
    assert 'status.running: Invalid value: "string"' in status.json()["message"]
    fine = http.patch(f"{PODGROUPS}/g/status", content=json.dumps({"status": {"running": 2}}), headers=MERGE)
    assert fine.status_code == 200, fine.text
    assert http.post(QUEUES, json={"metadata": {"name": "q"}, "spec": {"weight": 3}}).status_code == 201


def test_a_part_left_as_stored_is_not_checked_again(apiserver: ApiServer, http: httpx2.Client) -> None:
    """An object stored before its schema said otherwise can still be changed elsewhere."""
    queues = apiserver.api.resource("scheduling.volcano.sh", "v1beta1", "queues")
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "old"}}
    apiserver.store.put(queues, {**body, "spec": {"weight": 0}}, None)  # as if from an older server
    relabelled = http.patch(f"{QUEUES}/old", content=json.dumps({"metadata": {"labels": {"a": "b"}}}), headers=MERGE)
    assert relabelled.status_code == 200, relabelled.text
    changed = http.patch(f"{QUEUES}/old", content=json.dumps({"spec": {"weight": -1}}), headers=MERGE)
    assert changed.status_code == 422


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "kind": "Widget"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "exclusiveMaximum": True, "maximum": 10},
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({}, "spec.size: Required value", id="required"),
        pytest.param(
            {"size": 10}, "spec.size: Invalid value: 10: spec.size in body should be less than 10", id="exclusive-max"
        ),
        pytest.param(
            {"size": 2, "tags": ["a", 3]},
            'spec.tags[1]: Invalid value: "int64": spec.tags[1] in body must be of type string: "integer"',
            id="array-item",
        ),
    ],
)
def test_a_crd_written_to_the_server_checks_its_objects(
    http: httpx2.Client, spec: dict[str, Any], message: str
) -> None:
    assert http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD).status_code == 201
    widgets = "/apis/example.com/v1/namespaces/default/widgets"
    response = http.post(widgets, json={"metadata": {"name": "w"}, "spec": spec})
    assert response.status_code == 422, response.text
    assert response.json()["message"] == f'Widget.example.com "w" is invalid: {message}'
    assert http.post(widgets, json={"metadata": {"name": "w"}, "spec": {"size": 9, "tags": ["a"]}}).status_code == 201
