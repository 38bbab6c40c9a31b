"""The OpenAPI shapes the embedded API server decodes bodies with: the shipped definitions are what
scripts/gen_k8s_schemas.py writes from kubernetes-validate, each reported version maps to the newest
shipped one not newer than it, and decoding keeps known fields, drops unknown ones and words type
errors as Go's decoder does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from runtimekit.cluster.apiserver.errors import ApiError
from runtimekit.cluster.apiserver.openapi import Kind, available_versions, schema_version, shapes_for
from runtimekit.cluster.apiserver.typed import FieldValidation, collect_warnings, decode

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_definitions_are_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("gen_k8s_schemas", ROOT / "scripts" / "gen_k8s_schemas.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "src" / "runtimekit" / "data" / "k8s-schemas.json.gz").read_bytes() == module.build()


@pytest.mark.parametrize(
    ("reported", "used"),
    [((1, 20), "1.27"), ((1, 27), "1.27"), ((1, 31), "1.31"), ((1, 35), "1.35"), ((1, 40), "1.35"), ((2, 0), "1.35")],
    ids=["older than any", "1.27", "1.31", "1.35", "newer than any", "major 2"],
)
def test_a_reported_version_uses_the_newest_definitions_not_newer(reported: tuple[int, int], used: str) -> None:
    assert schema_version(*reported) == used
    assert used in available_versions()


@pytest.mark.parametrize("version", ["1.27", "1.31", "1.35"])
def test_the_kinds_the_server_serves_have_shapes(version: str) -> None:
    shapes = shapes_for(version)
    for api_version, kind in [
        ("v1", "Pod"),
        ("v1", "Node"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "Job"),
        ("coordination.k8s.io/v1", "Lease"),
        ("v1", "Binding"),
        ("policy/v1", "Eviction"),
    ]:
        shape = shapes.root(api_version, kind)
        assert shape is not None, (api_version, kind)
        assert shape.kind is Kind.STRUCT, (api_version, kind)
    assert shapes.root("scheduling.volcano.sh/v1beta1", "PodGroup") is None  # custom kinds pass through


def pod(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i", **container}]},
    }


def test_decoding_keeps_known_fields_and_drops_unknown_ones_with_warnings() -> None:
    shape = shapes_for("1.31").root("v1", "Pod")
    assert shape is not None
    body = pod(ports=[{"containerPort": 80, "extra": 1}], resources={"limits": {"cpu": "1"}})
    body["spec"]["overhead"] = {"cpu": "1"}
    with collect_warnings() as warnings:
        decoded = decode(shape, body, "Pod", "v1", FieldValidation.WARN)
    assert decoded["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    assert decoded["spec"]["overhead"] == {"cpu": "1"}
    assert warnings == ['unknown field "spec.containers[0].ports[0].extra"']


@pytest.mark.parametrize(
    ("container", "message"),
    [
        (
            {"ports": [{"containerPort": "80"}]},
            "cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort "
            "of type int32",
        ),
        ({"ports": [{"containerPort": 8.5}]}, "cannot unmarshal number 8.5 into Go struct field"),
        ({"stdin": "yes"}, "cannot unmarshal string into Go struct field Container.spec.containers.stdin of type bool"),
        ({"env": {"A": "1"}}, "cannot unmarshal object into Go struct field Container.spec.containers.env of type"),
    ],
    ids=["int as string", "int with a fraction", "bool as string", "list as object"],
)
def test_type_errors_are_worded_as_gos(container: dict[str, Any], message: str) -> None:
    shape = shapes_for("1.31").root("v1", "Pod")
    assert shape is not None
    with pytest.raises(ApiError) as caught:
        decode(shape, pod(**container), "Pod", "v1", FieldValidation.IGNORE)
    assert caught.value.code == 400
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("number", "stored"),
    [
        (30, "30"),
        (1000, "1k"),
        (16000, "16k"),
        (1024, "1024"),
        (0, "0"),
        (0.5, "500m"),
        (1.5, "1500m"),
        (2.5e9, "2500M"),
    ],
)
def test_a_number_given_for_a_quantity_is_stored_as_its_canonical_text(number: float, stored: str) -> None:
    """kube-apiserver decodes a JSON number into resource.Quantity and writes it back as canonical
    text (kubectl sends `nvidia.com/gpu: 1` from YAML as a number): limits, requests, overhead and a
    lone quantity field alike, on the quick path and on the path that words problems."""
    shape = shapes_for("1.31").root("v1", "Pod")
    assert shape is not None
    for extra in ({}, {"unknownField": 1}):  # the second takes the full walk
        body = pod(resources={"limits": {"example.com/foo": number}, "requests": {"cpu": number}}, **extra)
        body["spec"]["overhead"] = {"memory": number}
        body["spec"]["volumes"] = [{"name": "v", "emptyDir": {"sizeLimit": number}}]
        decoded = decode(shape, body, "Pod", "v1", FieldValidation.IGNORE)
        resources = decoded["spec"]["containers"][0]["resources"]
        assert resources == {"limits": {"example.com/foo": stored}, "requests": {"cpu": stored}}
        assert decoded["spec"]["overhead"] == {"memory": stored}
        assert decoded["spec"]["volumes"][0]["emptyDir"] == {"sizeLimit": stored}


def test_a_number_no_quantity_can_hold_is_refused() -> None:
    shape = shapes_for("1.31").root("v1", "Pod")
    assert shape is not None
    with pytest.raises(ApiError) as caught:
        decode(shape, pod(resources={"limits": {"cpu": float("inf")}}), "Pod", "v1", FieldValidation.IGNORE)
    assert caught.value.code == 400
    assert "quantities must match" in caught.value.message
