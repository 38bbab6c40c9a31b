"""The resource.k8s.io/v1 TypedDicts in `runtimekit.kube.objects.dra` name exactly the fields of kube's
v1 types: each is checked against the shipped OpenAPI definitions of Kubernetes 1.35 (the schema file
`scripts/gen_k8s_schemas.py` writes from kube's published OpenAPI)."""

from __future__ import annotations

import gzip
import json
from importlib import resources
from typing import Any

import pytest

from runtimekit.kube.objects import PodResourceClaim, PodResourceClaimStatus, dra

_PREFIX = "io.k8s.api.resource.v1."


def _v1_definitions() -> dict[str, Any]:
    raw = resources.files("runtimekit.data").joinpath("k8s-schemas.json.gz").read_bytes()
    doc = json.loads(gzip.decompress(raw))
    return {
        name.removeprefix(_PREFIX): doc["pool"][key]
        for name, key in doc["versions"]["1.35"].items()
        if name.startswith(_PREFIX) and not name.endswith("List")
    }


_DEFS = _v1_definitions()


@pytest.mark.parametrize("name", sorted(_DEFS))
def test_typed_dict_fields_are_kube_v1_fields(name: str) -> None:
    typed = vars(dra)[name]
    assert set(typed.__optional_keys__) == set(_DEFS[name].get("properties", {}))


def test_pod_claim_fields_are_kube_core_v1_fields() -> None:
    raw = resources.files("runtimekit.data").joinpath("k8s-schemas.json.gz").read_bytes()
    doc = json.loads(gzip.decompress(raw))
    names = doc["versions"]["1.35"]
    for typed, name in ((PodResourceClaim, "PodResourceClaim"), (PodResourceClaimStatus, "PodResourceClaimStatus")):
        assert set(typed.__optional_keys__) == set(doc["pool"][names["io.k8s.api.core.v1." + name]]["properties"])
